package qrsvg

import (
	"encoding/xml"
	"errors"
	"image"
	"image/color"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/makiuchi-d/gozxing"
	"github.com/makiuchi-d/gozxing/qrcode"
	goqr "github.com/piglig/go-qr"
)

const handoffURL = "https://queue.example.com/waiting-room/gala-2026#handoff=K7QM3XWD9P2HRT5A"

var texts = []struct {
	name, text string
}{
	{"numeric", "0123456789"},
	{"alphanumeric", "K7QM-3XWD-9P2H-RT5A"},
	{"handoff url", handoffURL},
	{"utf-8 bytes", "Warteschlange: Grüße aus Köln – 東京"},
	{"xml specials", `<a href="x">&'</a>`},
	{"long", strings.Repeat("waiting-room/", 80)},
}

// svgDoc is the shape SVG promises: the root, one white rect, one path.
type svgDoc struct {
	XMLName xml.Name   `xml:"http://www.w3.org/2000/svg svg"`
	Attrs   []xml.Attr `xml:",any,attr"`
	Rects   []struct {
		Width  string `xml:"width,attr"`
		Height string `xml:"height,attr"`
		Fill   string `xml:"fill,attr"`
	} `xml:"rect"`
	Paths []struct {
		D    string `xml:"d,attr"`
		Fill string `xml:"fill,attr"`
	} `xml:"path"`
}

func parse(t *testing.T, svg string) svgDoc {
	t.Helper()
	var doc svgDoc
	if err := xml.Unmarshal([]byte(svg), &doc); err != nil {
		t.Fatalf("SVG is not well-formed XML: %v\n%s", err, svg)
	}
	// A full token walk as well: catches trailing junk that Unmarshal ignores.
	d := xml.NewDecoder(strings.NewReader(svg))
	d.Strict = true
	depth, roots := 0, 0
	for {
		tok, err := d.Token()
		if err != nil {
			if err != io.EOF {
				t.Fatalf("token walk: %v", err)
			}
			break
		}
		switch tok.(type) {
		case xml.StartElement:
			if depth == 0 {
				roots++
			}
			depth++
		case xml.EndElement:
			depth--
		case xml.CharData:
			t.Fatalf("unexpected character data %q", tok)
		}
	}
	if roots != 1 || depth != 0 {
		t.Fatalf("roots=%d depth=%d, want one balanced root", roots, depth)
	}
	return doc
}

var runRE = regexp.MustCompile(`M(\d+) (\d+)h(\d+)v1h-(\d+)z`)

// grid reads the path back into an n×n module grid (true = dark), checking
// that every command is a 1-module-high run and that no module is drawn twice.
func grid(t *testing.T, d string, n int) [][]bool {
	t.Helper()
	g := make([][]bool, n)
	for i := range g {
		g[i] = make([]bool, n)
	}
	if rest := runRE.ReplaceAllString(d, ""); rest != "" {
		t.Fatalf("path has commands other than runs: %q", rest)
	}
	for _, m := range runRE.FindAllStringSubmatch(d, -1) {
		x, _ := strconv.Atoi(m[1])
		y, _ := strconv.Atoi(m[2])
		w, _ := strconv.Atoi(m[3])
		if m[3] != m[4] || w < 1 {
			t.Fatalf("run %q does not close on itself", m[0])
		}
		if x > 0 && g[y][x-1] {
			t.Errorf("run %q is not merged with the run to its left", m[0])
		}
		for i := x; i < x+w; i++ {
			if g[y][i] {
				t.Fatalf("module (%d,%d) drawn twice", i, y)
			}
			g[y][i] = true
		}
	}
	return g
}

func TestSVGShape(t *testing.T) {
	for _, tc := range texts {
		t.Run(tc.name, func(t *testing.T) {
			svg, err := SVG(tc.text)
			if err != nil {
				t.Fatal(err)
			}
			doc := parse(t, svg)
			q, err := encode(tc.text)
			if err != nil {
				t.Fatal(err)
			}
			n := q.Size() + 2*Quiet
			nn := strconv.Itoa(n)
			attrs := map[string]string{}
			for _, a := range doc.Attrs {
				attrs[a.Name.Local] = a.Value
			}
			want := map[string]string{
				"xmlns":           "http://www.w3.org/2000/svg",
				"viewBox":         "0 0 " + nn + " " + nn,
				"role":            "img",
				"shape-rendering": "crispEdges",
			}
			if diff := cmp.Diff(want, attrs); diff != "" {
				t.Errorf("svg attributes (-want +got):\n%s", diff)
			}
			if len(doc.Rects) != 1 || doc.Rects[0].Width != nn || doc.Rects[0].Height != nn || doc.Rects[0].Fill != "#fff" {
				t.Errorf("want one white %s×%s background rect, got %+v", nn, nn, doc.Rects)
			}
			if len(doc.Paths) != 1 {
				t.Fatalf("want one path, got %d", len(doc.Paths))
			}

			// The path covers exactly the library's dark modules, shifted by the quiet zone.
			wantGrid := make([][]bool, n)
			for y := range wantGrid {
				wantGrid[y] = make([]bool, n)
				for x := range wantGrid[y] {
					wantGrid[y][x] = q.Module(x-Quiet, y-Quiet)
				}
			}
			if diff := cmp.Diff(wantGrid, grid(t, doc.Paths[0].D, n)); diff != "" {
				t.Errorf("path modules differ from the symbol (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSVGDecodes rasterizes the SVG's own path (4 px per module) and reads it
// with an independent decoder (gozxing, a port of ZXing).
func TestSVGDecodes(t *testing.T) {
	const px = 4
	reader := qrcode.NewQRCodeReader()
	hints := map[gozxing.DecodeHintType]any{gozxing.DecodeHintType_CHARACTER_SET: "UTF-8"}
	for _, tc := range texts {
		t.Run(tc.name, func(t *testing.T) {
			svg, err := SVG(tc.text)
			if err != nil {
				t.Fatal(err)
			}
			doc := parse(t, svg)
			var n int
			for _, a := range doc.Attrs {
				if a.Name.Local == "viewBox" {
					n, _ = strconv.Atoi(strings.Fields(a.Value)[2])
				}
			}
			g := grid(t, doc.Paths[0].D, n)
			img := image.NewGray(image.Rect(0, 0, n*px, n*px))
			for y := 0; y < n*px; y++ {
				for x := 0; x < n*px; x++ {
					c := color.Gray{Y: 255}
					if g[y/px][x/px] {
						c.Y = 0
					}
					img.SetGray(x, y, c)
				}
			}
			bmp, err := gozxing.NewBinaryBitmapFromImage(img)
			if err != nil {
				t.Fatal(err)
			}
			res, err := reader.Decode(bmp, hints)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			got := struct{ Text, EC any }{res.GetText(), res.GetResultMetadata()[gozxing.ResultMetadataType_ERROR_CORRECTION_LEVEL]}
			want := struct{ Text, EC any }{tc.text, "M"}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("decoded (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSVGSize(t *testing.T) {
	if len(handoffURL) < 70 {
		t.Fatalf("example URL is %d chars, want ~80", len(handoffURL))
	}
	svg, err := SVG(handoffURL)
	if err != nil {
		t.Fatal(err)
	}
	if len(svg) >= 6*1024 {
		t.Errorf("SVG for a %d-char URL is %d bytes, want < 6 KiB", len(handoffURL), len(svg))
	}
	t.Logf("SVG for a %d-char URL: %d bytes", len(handoffURL), len(svg))
}

func TestSVGTooLong(t *testing.T) {
	for _, tc := range []struct {
		name, text string
	}{
		{"5000 bytes", strings.Repeat("x", 5000)},
		{"one past version 40-M byte capacity", strings.Repeat("x", 2332)},
		{"one past version 40-M numeric capacity", strings.Repeat("7", 5597)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svg, err := SVG(tc.text)
			if !errors.Is(err, goqr.ErrDataTooLong) {
				t.Errorf("err = %v, want ErrDataTooLong", err)
			}
			if svg != "" {
				t.Errorf("got %d bytes of SVG with the error", len(svg))
			}
		})
	}
	// The largest texts that fit at M still encode.
	for _, s := range []string{strings.Repeat("x", 2331), strings.Repeat("7", 5596)} {
		if _, err := SVG(s); err != nil {
			t.Errorf("%d chars: %v", len(s), err)
		}
	}
}

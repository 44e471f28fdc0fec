// Package qrsvg draws QR codes (error correction M) as small self-contained
// SVGs, the modules from github.com/piglig/go-qr.
package qrsvg

import (
	"fmt"
	"strconv"
	"strings"

	goqr "github.com/piglig/go-qr"
)

// Quiet is the width in modules of the light border around the symbol.
const Quiet = 4

// SVG returns text as a QR code (error correction M, no boost) in an SVG whose
// viewBox is in modules, a 4-module quiet zone included. The SVG has no width or
// height: the page sizes it. Text too long for any QR version is an error.
func SVG(text string) (string, error) {
	q, err := encode(text)
	if err != nil {
		return "", err
	}
	n := q.Size() + 2*Quiet
	var b strings.Builder
	b.Grow(64 * q.Size())
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" role="img" shape-rendering="crispEdges">`, n, n)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#fff"/><path fill="#000" d="`, n, n)
	for y := 0; y < q.Size(); y++ {
		for x := 0; x < q.Size(); {
			if !q.Module(x, y) {
				x++
				continue
			}
			w := 1
			for q.Module(x+w, y) {
				w++
			}
			ws := strconv.Itoa(w)
			b.WriteString("M" + strconv.Itoa(x+Quiet) + " " + strconv.Itoa(y+Quiet) + "h" + ws + "v1h-" + ws + "z")
			x += w
		}
	}
	b.WriteString(`"/></svg>`)
	return b.String(), nil
}

// encode makes the symbol at exactly level M (the library's default would raise
// the level when it fits in the same version).
func encode(text string) (*goqr.QrCode, error) {
	segs, err := goqr.MakeSegments(text)
	if err != nil {
		return nil, fmt.Errorf("qrsvg: %w", err)
	}
	q, err := goqr.EncodeSegments(segs, goqr.Medium, goqr.MinVersion, goqr.MaxVersion, -1, false)
	if err != nil {
		return nil, fmt.Errorf("qrsvg: %w", err)
	}
	return q, nil
}

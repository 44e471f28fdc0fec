package main

import (
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTradeoff(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tradeoff")
	out, errOut, err := runCmd(t, "tradeoff", "-users", "2000", "-admit-rate", "20", "-vary", "fraction=0.5,0.9", "-mark", "0.5",
		"-reference", "tiers", "-goal-p99", "1s", "-goal-requests", "5", "-out", dir)
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	for _, want := range []string{"**fraction=0.5** (chosen)", "| fraction=0.9 |", "| tiers |"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	svg, err := os.ReadFile(filepath.Join(dir, "tradeoff.svg"))
	if err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(strings.NewReader(string(svg)))
	circles := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("tradeoff.svg is not well-formed XML: %v", err)
			}
			break
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "circle" {
			circles++
		}
	}
	if circles != 2 {
		t.Errorf("%d points of the curve, want 2", circles)
	}
	for _, f := range []string{"tradeoff.md", "results.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	if _, errOut, err := runCmd(t, "tradeoff", "-vary", "fraction"); !errors.Is(err, errUsage) || !strings.Contains(errOut, "KEY=V1") {
		t.Errorf("bad -vary: %v, %s", err, errOut)
	}
}

package waitpage_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/example/waitingroom/internal/waitpage"
)

// TestStripComments: whole-line comments go, and code, a comment after
// code and a string holding // stay; a script where dropping a // line
// could change its meaning is refused: a string continued by a trailing
// backslash into a // line, a // line that closes a /* */ block, and a
// backquote (a template literal) outside the comments.
func TestStripComments(t *testing.T) {
	tests := []struct {
		name, src, want string
		refused         string // part of the panic's message; "": none
	}{
		{name: "comment lines", src: "// head\nconst a = 1;\n  // indented\n\t// tab\nf(a); // kept after code\n",
			want: "const a = 1;\nf(a); // kept after code\n"},
		{name: "a URL string", src: "const u = '//cdn.example.com/x.js';\nconst v =\n  '//cdn';\n",
			want: "const u = '//cdn.example.com/x.js';\nconst v =\n  '//cdn';\n"},
		{name: "a backquote in a comment", src: "// `code`\nx();\n", want: "x();\n"},
		{name: "a string continued by a backslash", src: "const s = 'a\\\n// b';\n", refused: "backslash"},
		{name: "a block comment closed on a // line", src: "/* a\n// b */\nx();\n", refused: "*/"},
		{name: "a backquote", src: "const s = `a\n// b`;\n", refused: "template literal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, panicked := strip(tt.src)
			switch {
			case tt.refused == "" && panicked != "":
				t.Errorf("refused: %s", panicked)
			case tt.refused == "" && got != tt.want:
				t.Errorf("stripComments(%q) = %q, want %q", tt.src, got, tt.want)
			case tt.refused != "" && !strings.Contains(panicked, tt.refused):
				t.Errorf("stripComments(%q) = %q, panic %q: want it refused (%q)", tt.src, got, panicked, tt.refused)
			}
		})
	}
}

// strip is waitpage.StripComments of src, or the message of its panic.
func strip(src string) (out, panicked string) {
	defer func() {
		if r := recover(); r != nil {
			panicked = fmt.Sprint(r)
		}
	}()
	return string(waitpage.StripComments("test.js", []byte(src))), ""
}

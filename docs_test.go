package waitingroom_test

// Holds the docs to the code: every Go identifier a document names in
// backticks (`queue.Program`, `passverify.Config.Now`, `Program.Rebased`)
// must be declared in this module, and every path of its code it names
// (`internal/tools/client`, `cmd/wrctl/settings.go`) must exist, so that a
// rename, a move or a removal cannot leave the docs naming what is gone.

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// TestDocsNameExistingIdentifiers scans README.md and docs/*.md; each
// problem names the document, the line and the name.
func TestDocsNameExistingIdentifiers(t *testing.T) {
	idx, err := indexModule(".")
	if err != nil {
		t.Fatal(err)
	}
	docs, err := filepath.Glob(filepath.Join("docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs = append([]string{"README.md"}, docs...)
	for _, doc := range docs {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range idx.check(doc, string(text)) {
			t.Error(p)
		}
	}
}

// TestDocIdentifierCheck holds the check itself to what it must catch and
// what it must leave alone, on a module of one package.
func TestDocIdentifierCheck(t *testing.T) {
	const src = `package queue

type Options struct{ ClosesAt int64 }
type Program struct {
	Options
	Current Segment
}
type Segment struct{ Base int64 }
type Tickets interface{ Take() }
type Error struct{}

func (p Program) Situation() int    { return 0 }
func (s *Segment) startMs() int64   { return 0 }
func PlaceOf(seed []byte, n int) int { return 0 }

const MaxEstimatedWait = 1
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "queue.go", src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	paths := map[string]bool{"internal/queue": true, "internal/queue/admin.go": true, "internal/testing": true, "cmd/wrctl": true}
	idx := newGoIndex(func(p string) bool { return paths[p] })
	idx.add(f)
	for _, tc := range []struct {
		line string
		want string // the problem reported, "" for none
	}{
		{"`queue.Program`", ""},
		{"`queue.PlaceOf`", ""},
		{"`queue.PlaceOf(seed, n)`", ""},
		{"`queue.MaxEstimatedWait`", ""},
		{"`queue.Program.Situation`", ""},
		{"`queue.Program.ClosesAt` (promoted from Options)", ""},
		{"`queue.Program.Current`", ""},
		{"`Program.Situation`", ""},
		{"`Segment.startMs`", ""},
		{"`*queue.Program`", ""},
		{"``queue.Error``", ""},
		{"`queue.Settings`", "queue.Settings"},
		{"`queue.SettingError`", "queue.SettingError"},
		{"`queue.Program.Change`", "queue.Program.Change"},
		{"`Program.change`", "Program.change"},
		{"`Program.Nope`", "Program.Nope"},
		{"`Settings.change` (a type that is gone)", "Settings.change"},
		{"text `queue.Program` then\n`queue.Gone`", "queue.Gone"},
		{"a span over two lines, `queue.\nGone`", ""},
		// Not identifiers of this module: left alone.
		{"`time.Duration`, `http.Handler`, `rand.Rand`, `json.Unmarshal`", ""},
		{"`main.go`, `queue.go`, `docs/design.md`, `README.md`, `Node.js`", ""},
		{"`queue.example.com`, `POLL_TIERS`, `wrctl put -opens-at`", ""},
		{"`capacity.foldedAtMs`, `Accept-Language`, `kms:Sign`", ""},
		{"`Config.Now` (no such type here), `Duration.Seconds`", ""},
		{"```\nqueue.Gone\n```", ""},
		// Paths of the repository's code.
		{"`internal/queue`, `internal/queue/admin.go`, `internal/testing/...`, `cmd/wrctl`", ""},
		{"`internal/queue.PlaceOf`", ""},
		{"`internal/partitionmodel` (moved)", "internal/partitionmodel"},
		{"`internal/queue.Gone`", "internal/queue.Gone"},
		{"`internal/queue/gone.go`", "internal/queue/gone.go"},
		{"```go\nx := `queue.Gone`\n```", ""},
	} {
		got := idx.check("doc.md", tc.line)
		switch {
		case tc.want == "" && len(got) > 0:
			t.Errorf("%q: want no problem, got %q", tc.line, got)
		case tc.want != "" && len(got) != 1:
			t.Errorf("%q: want one problem naming %s, got %q", tc.line, tc.want, got)
		case tc.want != "" && !strings.Contains(got[0], "`"+tc.want+"`"):
			t.Errorf("%q: want a problem naming %s, got %q", tc.line, tc.want, got[0])
		}
	}
	// The message names the file and the line.
	got := idx.check("docs/x.md", "one\n\ntwo `queue.Settings`\n")
	want := "docs/x.md:3: `queue.Settings`: queue declares no Settings"
	if len(got) != 1 || got[0] != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// goIndex holds the names this module declares: per package name, its
// package-level names; per type, its fields and methods, and the types it
// embeds (whose fields and methods it has too).
type goIndex struct {
	// exists reports whether a path of the repository exists.
	exists func(path string) bool
	names  map[string]map[string]bool // package → package-level names
	types  map[string]map[string]bool // package → type names
	byType map[string][]string        // type name → "package.Type" keys
	member map[string]map[string]bool // "package.Type" → fields and methods
	embeds map[string][]string        // "package.Type" → embedded "package.Type"s
}

func newGoIndex(exists func(string) bool) *goIndex {
	return &goIndex{
		exists: exists,
		names:  map[string]map[string]bool{},
		types:  map[string]map[string]bool{},
		byType: map[string][]string{},
		member: map[string]map[string]bool{},
		embeds: map[string][]string{},
	}
}

// indexModule parses every Go file under root but testdata, hidden
// folders and test files. Commands (package main) are not indexed: no doc
// names their identifiers as main.X.
func indexModule(root string) (*goIndex, error) {
	idx := newGoIndex(func(path string) bool {
		_, err := os.Stat(filepath.Join(root, filepath.FromSlash(path)))
		return err == nil
	})
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (name == "testdata" || name == "node_modules" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if f.Name.Name != "main" {
			idx.add(f)
		}
		return nil
	})
	return idx, err
}

func (x *goIndex) add(f *ast.File) {
	pkg := f.Name.Name
	if x.names[pkg] == nil {
		x.names[pkg], x.types[pkg] = map[string]bool{}, map[string]bool{}
	}
	imports := map[string]string{} // local name → package name, for embedded pkg.Type
	for _, im := range f.Imports {
		p := strings.Trim(im.Path.Value, `"`)
		local := p[strings.LastIndex(p, "/")+1:]
		if im.Name != nil {
			local = im.Name.Name
		}
		imports[local] = p[strings.LastIndex(p, "/")+1:]
	}
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil || len(d.Recv.List) == 0 {
				x.names[pkg][d.Name.Name] = true
				continue
			}
			if recv := typeName(d.Recv.List[0].Type, pkg, imports); recv != "" {
				x.addMember(recv, d.Name.Name)
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.ValueSpec:
					for _, n := range s.Names {
						x.names[pkg][n.Name] = true
					}
				case *ast.TypeSpec:
					x.addType(pkg, s, imports)
				}
			}
		}
	}
}

func (x *goIndex) addType(pkg string, s *ast.TypeSpec, imports map[string]string) {
	key := pkg + "." + s.Name.Name
	x.names[pkg][s.Name.Name] = true
	x.types[pkg][s.Name.Name] = true
	x.byType[s.Name.Name] = append(x.byType[s.Name.Name], key)
	if x.member[key] == nil {
		x.member[key] = map[string]bool{}
	}
	var fields *ast.FieldList
	switch t := s.Type.(type) {
	case *ast.StructType:
		fields = t.Fields
	case *ast.InterfaceType:
		fields = t.Methods
	default:
		if s.Assign.IsValid() { // an alias has its target's members
			if target := typeName(s.Type, pkg, imports); target != "" {
				x.embeds[key] = append(x.embeds[key], target)
			}
		}
	}
	if fields == nil {
		return
	}
	for _, fld := range fields.List {
		if len(fld.Names) == 0 { // embedded
			if emb := typeName(fld.Type, pkg, imports); emb != "" {
				x.embeds[key] = append(x.embeds[key], emb)
				x.addMember(key, emb[strings.LastIndex(emb, ".")+1:]) // the field itself
			}
			continue
		}
		for _, n := range fld.Names {
			x.addMember(key, n.Name)
		}
	}
}

func (x *goIndex) addMember(key, name string) {
	if x.member[key] == nil {
		x.member[key] = map[string]bool{}
	}
	x.member[key][name] = true
}

// typeName is "package.Type" for T, *T, T[P], pkg.T as a receiver or an
// embedded field; "" for anything else.
func typeName(e ast.Expr, pkg string, imports map[string]string) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return typeName(t.X, pkg, imports)
	case *ast.IndexExpr:
		return typeName(t.X, pkg, imports)
	case *ast.IndexListExpr:
		return typeName(t.X, pkg, imports)
	case *ast.Ident:
		return pkg + "." + t.Name
	case *ast.SelectorExpr:
		if id, ok := t.X.(*ast.Ident); ok && imports[id.Name] != "" {
			return imports[id.Name] + "." + t.Sel.Name
		}
	}
	return ""
}

// hasMember reports whether the type key has the field or method name,
// its own or promoted from a type it embeds.
func (x *goIndex) hasMember(key, name string, seen map[string]bool) bool {
	if seen[key] {
		return false
	}
	seen[key] = true
	if x.member[key][name] {
		return true
	}
	for _, emb := range x.embeds[key] {
		if _, known := x.member[emb]; !known || x.hasMember(emb, name, seen) {
			return true // a type from outside the module: its members are not indexed
		}
	}
	return false
}

// identSpan is a code span that is a dotted Go name: two or three
// identifiers, optionally behind * and before a call's parentheses.
var identSpan = regexp.MustCompile(`^\*?([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*){1,2})(?:\(.*\))?$`)

// fileSuffixes end names that are files or hosts, not Go selectors.
var fileSuffixes = map[string]bool{
	"go": true, "md": true, "mod": true, "sum": true, "yaml": true, "yml": true,
	"json": true, "html": true, "js": true, "css": true, "toml": true, "txt": true,
	"sh": true, "png": true, "svg": true, "csv": true, "gz": true, "com": true,
	"org": true, "net": true, "io": true, "dev": true, "local": true,
}

// check returns a problem for each code span of text (a Markdown document
// named doc) that names a Go identifier of this module that is not
// declared. A span is checked when it is pkg.Name or pkg.Type.Member with
// pkg a package of this module, or Type.Member with Type a type this
// module declares (std-lib package names are lower case, so never such a
// type); and Type.member (an unexported member, which only this module's
// types can have) whatever the type. Anything else (time.Duration, file
// names, hosts, attributes, commands) is not a Go name of ours. A span
// that is a path under internal/, cmd/, functions/ or passverify must
// exist.
func (x *goIndex) check(doc, text string) []string {
	var problems []string
	for _, s := range codeSpans(text) {
		if p := pathSpan.FindStringSubmatch(s.text); p != nil {
			if msg := x.resolvePath(p[1]); msg != "" {
				problems = append(problems, fmt.Sprintf("%s:%d: `%s`: %s", doc, s.line, s.text, msg))
			}
			continue
		}
		m := identSpan.FindStringSubmatch(s.text)
		if m == nil {
			continue
		}
		segs := strings.Split(m[1], ".")
		if fileSuffixes[segs[len(segs)-1]] {
			continue
		}
		if msg := x.resolve(segs); msg != "" {
			problems = append(problems, fmt.Sprintf("%s:%d: `%s`: %s", doc, s.line, m[1], msg))
		}
	}
	return problems
}

// pathSpan is a code span that is a path of this repository's Go code
// (internal/queue, cmd/wrctl/settings.go, internal/testing/...), or a
// package's path and one of its names (internal/challenge.Solve).
var pathSpan = regexp.MustCompile(`^((?:internal|cmd|functions|passverify)(?:/[A-Za-z0-9_.-]+)*?)(?:/\.\.\.)?$`)

// resolvePath returns why path names nothing in the repository, or "".
func (x *goIndex) resolvePath(path string) string {
	if x.exists(path) {
		return ""
	}
	dir, name := path, ""
	if i := strings.LastIndex(path, "."); i > strings.LastIndex(path, "/") && !fileSuffixes[path[i+1:]] {
		dir, name = path[:i], path[i+1:]
	}
	if name == "" || !x.exists(dir) {
		return "no such file or folder"
	}
	return x.resolve([]string{dir[strings.LastIndex(dir, "/")+1:], name})
}

// resolve returns why segs names nothing declared, or "".
func (x *goIndex) resolve(segs []string) string {
	first := segs[0]
	if names, ok := x.names[first]; ok && isLower(first) {
		if !names[segs[1]] {
			return fmt.Sprintf("%s declares no %s", first, segs[1])
		}
		if len(segs) == 3 && x.types[first][segs[1]] &&
			!x.hasMember(first+"."+segs[1], segs[2], map[string]bool{}) {
			return fmt.Sprintf("%s.%s has no field or method %s", first, segs[1], segs[2])
		}
		return ""
	}
	if !unicode.IsUpper(rune(first[0])) {
		return ""
	}
	keys, declared := x.byType[first]
	if !declared {
		if isLower(segs[1]) {
			return fmt.Sprintf("no type %s is declared", first)
		}
		return ""
	}
	if !slices.ContainsFunc(keys, func(k string) bool { return x.hasMember(k, segs[1], map[string]bool{}) }) {
		return fmt.Sprintf("no type %s has a field or method %s", first, segs[1])
	}
	return ""
}

func isLower(s string) bool { return s != "" && unicode.IsLower(rune(s[0])) }

type codeSpan struct {
	line int
	text string
}

// codeSpans returns the inline code spans of a Markdown text with the line
// each starts on: a run of backticks up to the next run of the same
// length, within a paragraph (a span may cross a line break, not a blank
// line). Fenced code blocks are skipped.
func codeSpans(text string) []codeSpan {
	lines := strings.Split(text, "\n")
	var spans []codeSpan
	var para []string // the paragraph's lines
	start := 0        // the line number of para[0]
	flush := func() {
		spans = append(spans, paragraphSpans(para, start)...)
		para = nil
	}
	fence := ""
	for i, l := range lines {
		trimmed := strings.TrimLeft(l, " ")
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			flush()
			fence = trimmed[:3]
			continue
		}
		if strings.TrimSpace(l) == "" {
			flush()
			continue
		}
		if para == nil {
			start = i + 1
		}
		para = append(para, l)
	}
	flush()
	return spans
}

func paragraphSpans(para []string, start int) []codeSpan {
	text := strings.Join(para, "\n")
	var spans []codeSpan
	for i := 0; i < len(text); {
		if text[i] != '`' {
			i++
			continue
		}
		n := run(text, i)
		open := i
		i += n
		for j := i; j < len(text); {
			if text[j] != '`' {
				j++
				continue
			}
			m := run(text, j)
			if m == n {
				body := strings.ReplaceAll(text[i:j], "\n", " ")
				if len(body) > 2 && body[0] == ' ' && body[len(body)-1] == ' ' {
					body = body[1 : len(body)-1]
				}
				spans = append(spans, codeSpan{line: start + strings.Count(text[:open], "\n"), text: body})
				i = j + m
				break
			}
			j += m
		}
	}
	return spans
}

// run is the length of the run of backticks at text[i].
func run(text string, i int) int {
	n := 0
	for i+n < len(text) && text[i+n] == '`' {
		n++
	}
	return n
}

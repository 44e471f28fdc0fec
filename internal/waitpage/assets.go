package waitpage

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"mime"
	"net/http"
	"path"
	"regexp"
	"strconv"
	"strings"
)

//go:embed web/app.js web/app.css web/pow.js web/push.js web/push-worker.js web/handoff.js
var web embed.FS

// textMarker is the placeholder in a script (app.js, push.js, handoff.js, push-worker.js)
// that the text table replaces: every language, with the keys the script
// names in quotes, so that each carries only its own texts.
const textMarker = "/*TEXT*/{}"

// asset is one static file, served under its content-hashed name (with gzip).
type asset struct {
	body, gz []byte
	ctype    string
}

var (
	assets   = map[string]*asset{} // by hashed file name, e.g. "app.3f9a1c2b.js"
	assetURL = map[string]string{} // a source name ("app.js") to its hashed URL
)

// init registers each asset under its name with a hash of its content before the extension.
func init() {
	for _, name := range []string{"app.js", "app.css", "pow.js", "push.js", "handoff.js"} {
		b := readWeb(name)
		if strings.HasSuffix(name, ".js") {
			b = stripComments(name, b)
		}
		if strings.HasSuffix(name, ".js") && name != "pow.js" {
			b = withTexts(name, b)
		}
		sum := sha256.Sum256(b)
		ext := path.Ext(name)
		hashed := strings.TrimSuffix(name, ext) + "." + hex.EncodeToString(sum[:4]) + ext
		var gz bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
		_, _ = zw.Write(b)
		_ = zw.Close()
		assets[hashed] = &asset{body: b, gz: gz.Bytes(), ctype: mime.TypeByExtension(ext)}
		assetURL[name] = assetPrefix + hashed
	}
}

// readWeb returns the embedded web/name.
func readWeb(name string) []byte {
	b, err := web.ReadFile("web/" + name)
	if err != nil {
		panic("waitpage: " + err.Error())
	}
	return b
}

var (
	// lineComment is a line of a script that holds only a comment.
	lineComment = regexp.MustCompile(`(?m)^[ \t]*//.*\n`)
	// continued is a line that ends with a backslash (a string continued)
	// followed by a line that starts with //.
	continued = regexp.MustCompile(`\\\r?\n[ \t]*//`)
)

// stripComments drops the lines of the script src that hold only a
// comment: the files keep them for their readers, the browser has no use
// for them (about a sixth of app.js). It refuses (panics, at start-up) a
// script where such a line may not be a comment, or may matter: inside a
// template literal (src must hold no backquote outside its comments), in
// a string continued by a trailing backslash (no line may end with one
// before a // line), or inside a /* */ block it closes (no // line may
// hold */).
func stripComments(name string, src []byte) []byte {
	if continued.Match(src) {
		panic("waitpage: " + name + " continues a line with a backslash into a // line, which stripComments would drop from its string")
	}
	for _, line := range lineComment.FindAll(src, -1) {
		if bytes.Contains(line, []byte("*/")) {
			panic("waitpage: " + name + " has a // line holding */, which may close a block comment that stripComments would leave open")
		}
	}
	out := lineComment.ReplaceAll(src, nil)
	if bytes.ContainsRune(out, '`') {
		panic("waitpage: " + name + " holds a template literal, whose lines stripComments could change")
	}
	return out
}

// withTexts replaces the text marker in the script src, which must hold it
// once, by the table of the texts src names: {"en": {key: text, …}, …}.
func withTexts(name string, src []byte) []byte {
	if bytes.Count(src, []byte(textMarker)) != 1 {
		panic("waitpage: " + name + " must hold " + textMarker + " once")
	}
	table := map[string]map[string]string{}
	for code, l := range text {
		table[code] = map[string]string{}
		for key, s := range l.texts {
			if bytes.Contains(src, []byte("'"+key+"'")) || bytes.Contains(src, []byte(`"`+key+`"`)) {
				table[code][key] = s
			}
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(table); err != nil { // keys sorted: the same bytes, the same hash
		panic("waitpage: " + err.Error())
	}
	return bytes.Replace(src, []byte(textMarker), bytes.TrimSpace(buf.Bytes()), 1)
}

// pushWorker is the service worker that shows push messages, with its texts.
var pushWorker = withTexts("push-worker.js", stripComments("push-worker.js", readWeb("push-worker.js")))

// servePushWorker is GET /waiting-room/push-worker.js: the service worker keeps
// its URL, so it is not hashed, and the browser checks it for updates.
func servePushWorker(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("Content-Type", "text/javascript; charset=utf-8")
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("Service-Worker-Allowed", PathPrefix)
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Content-Length", strconv.Itoa(len(pushWorker)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(pushWorker)
	}
}

// serveAsset is GET /waiting-room/assets/{file}, cached for a year; gzip when accepted.
func serveAsset(w http.ResponseWriter, r *http.Request) {
	a, ok := assets[r.PathValue("file")]
	if !ok {
		http.NotFound(w, r)
		return
	}
	hdr := w.Header()
	hdr.Set("Content-Type", a.ctype)
	hdr.Set("Cache-Control", "public, max-age=31536000, immutable")
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Vary", "Accept-Encoding")
	body := a.body
	if acceptsGzip(r) {
		hdr.Set("Content-Encoding", "gzip")
		body = a.gz
	}
	hdr.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// acceptsGzip reports whether r's Accept-Encoding lists gzip without q=0.
func acceptsGzip(r *http.Request) bool {
	for part := range strings.SplitSeq(r.Header.Get("Accept-Encoding"), ",") {
		coding, params, _ := strings.Cut(part, ";")
		if strings.TrimSpace(coding) != "gzip" {
			continue
		}
		q := strings.ReplaceAll(params, " ", "")
		return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
	}
	return false
}

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
	"strconv"
	"strings"
)

//go:embed web/app.js web/app.css web/pow.js
var web embed.FS

// textMarker is the placeholder in app.js that the text table replaces.
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
	compact := new(bytes.Buffer)
	if err := json.Compact(compact, textJSON); err != nil {
		panic("waitpage: web/text.json: " + err.Error())
	}
	for _, name := range []string{"app.js", "app.css", "pow.js"} {
		b, err := web.ReadFile("web/" + name)
		if err != nil {
			panic("waitpage: " + err.Error())
		}
		if name == "app.js" {
			if bytes.Count(b, []byte(textMarker)) != 1 {
				panic("waitpage: app.js must hold " + textMarker + " once")
			}
			b = bytes.Replace(b, []byte(textMarker), compact.Bytes(), 1)
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

package waitpage

import (
	"bytes"
	"cmp"
	_ "embed"
	"fmt"
	"html/template"
	"net/http"
	"time"
)

//go:embed web/page.html
var pageHTML string

// parsePage parses the page's template, then override's {{define}}s over its blocks.
func parsePage(override string) (*template.Template, error) {
	t := template.Must(template.New("page").Parse(pageHTML))
	if _, err := t.New("override").Parse(override); err != nil {
		return nil, fmt.Errorf("waitpage: template override: %w", err)
	}
	return t, nil
}

// pageData is what page.html renders.
type pageData struct {
	lang                 language
	Lang, Title, Program string
	Info                 PageInfo
	Logo, API            string
	CSS, JS, POW         string // POW: the proof of work's worker script
	// Handoff is the script that moves a place to another device, which
	// app.js fetches only when needed.
	Handoff string
	// PushKey is the VAPID public key of the deployment's push, "" for none;
	// with one the page loads Push, the script that offers notifications.
	PushKey, Push string
	Refresh       int // seconds until the page reloads itself (error pages); 0: never
	// ClosesAt is Info.ClosesAt in RFC 3339, "" for none: app.js says it.
	ClosesAt string
	// Return is the path of this site to send the admitted back to (the edge gate's ?return=); "" for none.
	Return   string
	Error    *errorData
	NoScript *noscriptData
}

// T returns the text of key in the page's language.
func (d *pageData) T(key string) string { return d.lang.t(key) }

// errorData is the card of a 400, 404 or 503 page.
type errorData struct{ Title, Text string }

func (h *Handler) data(lang language, programID string, info PageInfo) *pageData {
	d := &pageData{
		lang: lang, Lang: lang.code, Title: cmp.Or(info.DisplayName, programID, lang.t("title")), Program: programID, Info: info,
		Logo: h.logo, API: h.apiBase, CSS: assetURL["app.css"], JS: assetURL["app.js"], POW: assetURL["pow.js"],
		Push: assetURL["push.js"], Handoff: assetURL["handoff.js"],
	}
	if !info.ClosesAt.IsZero() {
		d.ClosesAt = info.ClosesAt.UTC().Format(time.RFC3339)
	}
	return d
}

// render writes the page with status, or a plain 500 on a template error.
func (h *Handler) render(w http.ResponseWriter, status int, d *pageData) {
	var buf bytes.Buffer
	if err := h.tmpl.ExecuteTemplate(&buf, "page", d); err != nil {
		h.log.Error("waiting-room page: template", "err", err)
		http.Error(w, "Internal error.", http.StatusInternalServerError)
		return
	}
	hdr := w.Header()
	hdr.Set("Content-Type", "text/html; charset=utf-8")
	if hdr.Get("Cache-Control") == "" {
		hdr.Set("Cache-Control", "no-cache")
	}
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "same-origin")
	hdr.Add("Vary", "Accept-Language, Cookie")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

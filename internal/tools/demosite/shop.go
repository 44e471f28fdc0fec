package demosite

import (
	"html/template"
	"net/http"
	"strings"
)

// ShopPrefix is the path of the demo shop: a site with no code of its own,
// which the local server puts behind the edge gate.
const ShopPrefix = "/shop/"

var shopPage = template.Must(template.New("shop").Parse(`<!doctype html>
<html lang="en"><meta charset="utf-8"><title>Demo shop</title>
<link rel="stylesheet" href="/shop/shop.css">
<main><h1>Demo shop</h1><p id="page">You are on {{.}}.</p>
<p>This site has no code of its own: the edge gate in front of it let you in.</p>
<p><a href="/shop/cart">Your cart</a></p></main>
</html>
`))

// Shop serves the demo shop: a page at every path under ShopPrefix that
// says which it is, and its stylesheet, /shop/shop.css.
func Shop() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		if strings.HasSuffix(r.URL.Path, ".css") {
			w.Header().Set("Content-Type", "text/css")
			_, _ = w.Write([]byte("body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:40rem}\n"))
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = shopPage.Execute(w, r.URL.Path)
	})
}

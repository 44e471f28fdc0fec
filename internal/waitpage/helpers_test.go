package waitpage

import (
	"net/http/httptest"
	"testing"
	"time"
)

func TestAdmittedURL(t *testing.T) {
	tests := []struct{ back, target, pass, edge, want string }{
		{"", "https://tickets.example.com/buy", "h.p.s", "", "https://tickets.example.com/buy?admissionPass=h.p.s"},
		{"", "https://tickets.example.com/buy?event=7&x=a%20b#seat", "h.p.s", "", "https://tickets.example.com/buy?event=7&x=a%20b&admissionPass=h.p.s#seat"},
		{"", "https://tickets.example.com/", "a+b/c=", "", "https://tickets.example.com/?admissionPass=a%2Bb%2Fc%3D"},
		{"", "http://127.0.0.1:3000/demo-site/demo", "", "", "http://127.0.0.1:3000/demo-site/demo"},
		{"", "javascript:alert(1)", "h.p.s", "", ""},
		{"", "/relative", "h.p.s", "", ""},
		{"", "", "h.p.s", "", ""},
		// Through the edge gate: back to the path, with the token only.
		{"/shop/cart?item=3", "https://tickets.example.com/", "h.p.s", "k.gala.9.j.m", "/shop/cart?item=3&wrEdge=k.gala.9.j.m"},
		{"/shop/", "", "h.p.s", "k.gala.9.j.m", "/shop/?wrEdge=k.gala.9.j.m"},
		// The token goes back through the gate only; a back without a token (not at the gate) is ignored.
		{"", "https://tickets.example.com/", "h.p.s", "k.gala.9.j.m", "https://tickets.example.com/?admissionPass=h.p.s"},
		{"/shop/", "https://tickets.example.com/", "h.p.s", "", "https://tickets.example.com/?admissionPass=h.p.s"},
	}
	for _, tt := range tests {
		if got := admittedURL(tt.back, tt.target, View{AdmissionPass: tt.pass, EdgeToken: tt.edge}); got != tt.want {
			t.Errorf("admittedURL(%q, %q, %q, %q) = %q, want %q", tt.back, tt.target, tt.pass, tt.edge, got, tt.want)
		}
	}
}

func TestReturnPath(t *testing.T) {
	for _, tc := range []struct {
		v       string
		guarded []string
		want    string
	}{
		{"/shop/cart?item=3#x", []string{"/shop/"}, "/shop/cart?item=3#x"},
		{"/SHOP/cart", []string{"/shop/"}, "/SHOP/cart"},
		{"/shop", []string{"/shop/"}, "/shop"},
		{"/tickets-2/x", []string{"/tickets"}, "/tickets-2/x"}, // /tickets, not /tickets/, is its prefix
		{"/", []string{"/shop/"}, ""},                          // not guarded
		{"/account", []string{"/shop/"}, ""},
		{"/", []string{"/"}, "/"},
		{"/a", nil, ""}, // not at the gate
		{"", []string{"/"}, ""},
		{"shop", []string{"/"}, ""},
		{"//evil.example/", []string{"/"}, ""},
		{"/\\evil.example", []string{"/"}, ""},
		{"https://evil.example/", []string{"/"}, ""},
		{"/a b", []string{"/"}, ""},
		{"/a\nb", []string{"/"}, ""},
	} {
		if got := returnPath(tc.v, tc.guarded); got != tc.want {
			t.Errorf("returnPath(%q, %q) = %q, want %q", tc.v, tc.guarded, got, tc.want)
		}
	}
}

func TestWaitInWords(t *testing.T) {
	en, ko := text["en"], text["ko"]
	tests := []struct {
		lang language
		d    time.Duration
		want string
	}{
		{en, 0, "not known yet"},
		{en, 30 * time.Second, "less than a minute"},
		{en, 4*time.Minute + 10*time.Second, "about 4 min"},
		{en, 59 * time.Minute, "about 59 min"},
		{en, 95 * time.Minute, "about 1.5 h"},
		{ko, 4 * time.Minute, "약 4분"},
		{ko, 3 * time.Hour, "약 3시간"},
	}
	for _, tt := range tests {
		if got := tt.lang.wait(tt.d); got != tt.want {
			t.Errorf("%s wait(%v) = %q, want %q", tt.lang.code, tt.d, got, tt.want)
		}
	}
}

func TestNumber(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 7: "7", 999: "999", 1000: "1,000", 1234567: "1,234,567", -1500: "-1,500"} {
		if got := number(n); got != want {
			t.Errorf("number(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestAcceptsGzip(t *testing.T) {
	for header, want := range map[string]bool{"": false, "gzip": true, "br, gzip;q=0.5": true, "gzip;q=0": false, "identity": false, "x-gzip": false} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Accept-Encoding", header)
		if got := acceptsGzip(r); got != want {
			t.Errorf("acceptsGzip(%q) = %v, want %v", header, got, want)
		}
	}
}

// Every language has every key of English, so that no text falls back
// unnoticed.
func TestTextTableComplete(t *testing.T) {
	for code, l := range text {
		for key := range text[fallbackLang].texts {
			if _, ok := l.texts[key]; !ok {
				t.Errorf("%s lacks %q", code, key)
			}
		}
	}
}

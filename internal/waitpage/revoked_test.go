package waitpage_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/waitpage"
)

// TestNoScriptRevoked: without JavaScript, a revoked token's page says
// its place was withdrawn, and offers to enter again.
func TestNoScriptRevoked(t *testing.T) {
	q := newFakeQueue()
	q.add("gala", gala())
	h := newHandler(t, q, waitpage.Options{})
	page := send(h, "GET", "http://127.0.0.1:3000/waiting-room/gala", nil, nil).Body.String()
	key := strings.SplitN(strings.SplitN(page, `name="key" value="`, 2)[1], `"`, 2)[0]
	w := send(h, "POST", "http://127.0.0.1:3000/waiting-room/gala/enter", strings.NewReader(url.Values{"key": {key}, "lang": {"en"}}.Encode()),
		http.Header{"Content-Type": {"application/x-www-form-urlencoded"}})
	c := w.Result().Cookies()[0]
	q.set(c.Value, api.StatusRevoked)
	body := send(h, "GET", "http://127.0.0.1:3000/waiting-room/gala?lang=en", nil, http.Header{"Cookie": {c.Name + "=" + c.Value}}).Body.String()
	for _, want := range []string{"Your place was withdrawn", "The organiser withdrew this place at ", `action="/waiting-room/gala/enter"`} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q:\n%s", want, body)
		}
	}
}

package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// rawConn is one client connection that writes bytes as given and reads
// answers.
type rawConn struct {
	net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, base string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{c, bufio.NewReader(c)}
}

// send writes raw and reads one answer within wait.
func (c *rawConn) send(t *testing.T, raw string, wait time.Duration) (*http.Response, string) {
	t.Helper()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	return c.answer(t, wait)
}

func (c *rawConn) answer(t *testing.T, wait time.Duration) (*http.Response, string) {
	t.Helper()
	return c.answerHas(t, wait, "")
}

// answerHas is answer, reading the body only until it holds has (or
// ends): an answer without a length ends when the server closes, which
// Go's server does only after a pause of its own.
func (c *rawConn) answerHas(t *testing.T, wait time.Duration, has string) (*http.Response, string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(wait))
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		t.Fatalf("no answer within %s: %v", wait, err)
	}
	defer resp.Body.Close()
	var body []byte
	buf := make([]byte, 4096)
	for has == "" || !strings.Contains(string(body), has) {
		n, err := resp.Body.Read(buf)
		body = append(body, buf[:n]...)
		if err != nil {
			break
		}
	}
	return resp, string(body)
}

// TestLocalEdges holds the local server to the API's JSON where net/http
// lets a handler answer, and documents where it does not: requests Go's
// server rejects before any handler runs get its own text/plain answer
// (docs/operations.md, "The local server").
func TestLocalEdges(t *testing.T) {
	t.Parallel()
	base := start(t, map[string]string{"ADMIN_TOKEN": "s3cret"}, "-read-timeout", "500ms")
	const host = "Host: local\r\n"
	tests := []struct {
		name, raw   string
		wantStatus  int
		wantType    string
		wantBodyHas string
	}{
		{"NoRoute", "GET /nothing HTTP/1.1\r\n" + host + "\r\n", 404, "application/json; charset=utf-8", `"code":"NOT_FOUND"`},
		{"DoubleSlash", "GET //api/v1/queues/programs/demo HTTP/1.1\r\n" + host + "\r\n", 404, "application/json; charset=utf-8", `"code":"NOT_FOUND"`},
		{"Method", "TRACE /api/v1/queues/programs/demo HTTP/1.1\r\n" + host + "\r\n", 405, "application/json; charset=utf-8", `"code":"METHOD_NOT_ALLOWED"`},
		{"BodyTooLarge", "PUT /api/v1/admin/programs/demo HTTP/1.1\r\n" + host + "Authorization: Bearer s3cret\r\nContent-Length: 20000\r\n\r\n", 413, "application/json; charset=utf-8", `"code":"PAYLOAD_TOO_LARGE"`},
		// A body that stops arriving: ReadTimeout (500 ms here) ends the
		// read, and the handler answers. The one case that waits for a
		// timeout, net/http's own, as it is the subject.
		{"EndlessBody", "PUT /api/v1/admin/programs/demo HTTP/1.1\r\n" + host + "Authorization: Bearer s3cret\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"pau\r\n", 400, "application/json; charset=utf-8", `"code":"INVALID_BODY"`},
		// A body shorter than its length: the client closes its side.
		{"ShortBody", "PUT /api/v1/admin/programs/demo HTTP/1.1\r\n" + host + "Authorization: Bearer s3cret\r\nContent-Length: 100\r\n\r\n{\"paused\":", 400, "application/json; charset=utf-8", `"code":"INVALID_BODY"`},
		// Go's server answers these itself.
		{"BadEscape", "GET /api/v1/queues/programs/%zz HTTP/1.1\r\n" + host + "\r\n", 400, "text/plain; charset=utf-8", "400 Bad Request"},
		{"NULInHeader", "GET /api/v1/queues/programs/demo HTTP/1.1\r\n" + host + "X-Queue-Token: a\x00b\r\n\r\n", 400, "text/plain; charset=utf-8", "400 Bad Request"},
		{"HeadersTooLarge", "GET /api/v1/queues/programs/demo HTTP/1.1\r\n" + host + "X-Big: " + strings.Repeat("a", 32<<10) + "\r\n\r\n", 431, "text/plain; charset=utf-8", "431 Request Header Fields Too Large"},
		{"TransferEncoding", "POST /api/v1/queues/programs/demo HTTP/1.1\r\n" + host + "Transfer-Encoding: gzip\r\n\r\n", 501, "text/plain; charset=utf-8", "Unsupported transfer encoding"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dial(t, base)
			if _, err := io.WriteString(c, tt.raw); err != nil {
				t.Fatal(err)
			}
			if tt.name == "ShortBody" {
				if err := c.Conn.(*net.TCPConn).CloseWrite(); err != nil {
					t.Fatal(err)
				}
			}
			// A minute bounds a hang only.
			resp, body := c.answerHas(t, time.Minute, tt.wantBodyHas)
			if resp.StatusCode != tt.wantStatus || resp.Header.Get("Content-Type") != tt.wantType || !strings.Contains(body, tt.wantBodyHas) {
				t.Errorf("%d %q %s, want %d %q with %s", resp.StatusCode, resp.Header.Get("Content-Type"), body, tt.wantStatus, tt.wantType, tt.wantBodyHas)
			}
		})
	}
}

// TestLocalConnLimit: with -max-conns 3, three idle keep-alive connections
// do not lock a fourth client out: idle ones are closed to make room.
func TestLocalConnLimit(t *testing.T) {
	t.Parallel()
	base := start(t, map[string]string{"ADMIN_TOKEN": "s3cret"}, "-max-conns", "3", "-idle-timeout", "1m")
	const poll = "GET /nothing HTTP/1.1\r\nHost: local\r\n\r\n"
	var idle []*rawConn
	for range 3 {
		c := dial(t, base)
		if resp, _ := c.send(t, poll, 5*time.Second); resp.StatusCode != 404 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		idle = append(idle, c)
	}
	if resp, _ := dial(t, base).send(t, poll, 3*time.Second); resp.StatusCode != 404 {
		t.Fatalf("fourth client: status %d", resp.StatusCode)
	}
	// The server closed one idle connection (the one idle longest) when
	// the fourth came: the first of the three to end reads EOF. A minute
	// bounds a server that closed none; the others end with the test.
	ended := make(chan error, len(idle))
	for _, c := range idle {
		_ = c.SetReadDeadline(time.Now().Add(time.Minute))
		go func() {
			_, err := c.r.ReadByte()
			ended <- err
		}()
	}
	if err := <-ended; err != io.EOF {
		t.Errorf("the first idle connection to end: %v, want EOF (one closed to make room)", err)
	}
}

package passverify

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// SessionPath is the waiting room's API route that ends an admission.
const SessionPath = "/api/v1/queues/programs/{programId}/session"

// EndSession tells the waiting room at apiBase (e.g. https://queue.example.com)
// that the site is done with the holder of programID's pass; ending it twice is
// no error. client nil means http.DefaultClient.
func EndSession(ctx context.Context, client *http.Client, apiBase, programID, pass string) error {
	u := strings.TrimSuffix(apiBase, "/") + strings.ReplaceAll(SessionPath, "{programId}", url.PathEscape(programID))
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, u, nil)
	if err != nil {
		return fmt.Errorf("passverify: end session: %w", err)
	}
	req.Header.Set("X-Admission-Pass", pass)
	resp, err := cmp.Or(client, http.DefaultClient).Do(req)
	if err != nil {
		return fmt.Errorf("passverify: end session: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNoContent {
		return nil
	}
	e := &SessionError{Status: resp.StatusCode}
	_ = json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(e) // a body not the API's leaves Code empty
	return e
}

// SessionError is the waiting room's answer when it did not end a session:
// its HTTP status, and its JSON body's code (INVALID_PASS…) and message.
type SessionError struct {
	Status  int
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *SessionError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("passverify: end session: HTTP %d", e.Status)
	}
	return fmt.Sprintf("passverify: end session: HTTP %d %s: %s", e.Status, e.Code, e.Message)
}

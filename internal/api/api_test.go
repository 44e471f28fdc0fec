package api_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/example/waitingroom/internal/api"
)

// TestTimeJSON: a Time is RFC 3339 UTC with milliseconds in JSON, absent
// when zero, and "" or null reads as zero.
func TestTimeJSON(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 123456789, time.FixedZone("JST", 9*3600))
	b, err := json.Marshal(api.Token{TokenID: "t", IssuedAt: api.TimeOf(at)})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"tokenId":"t","status":"","ticket":0,"issuedAt":"2026-12-01T01:00:00.123Z"}`; string(b) != want {
		t.Errorf("Marshal = %s, want %s", b, want)
	}
	for _, tc := range []struct {
		in   string
		want time.Time
	}{
		{`{"issuedAt":"2026-12-01T10:00:00.123+09:00"}`, time.Date(2026, 12, 1, 1, 0, 0, 123e6, time.UTC)},
		{`{"issuedAt":""}`, time.Time{}},
		{`{"issuedAt":null}`, time.Time{}},
		{`{}`, time.Time{}},
	} {
		var tok api.Token
		if err := json.Unmarshal([]byte(tc.in), &tok); err != nil {
			t.Errorf("Unmarshal(%s): %v", tc.in, err)
		}
		if !tok.IssuedAt.Equal(tc.want) {
			t.Errorf("Unmarshal(%s) = %v, want %v", tc.in, tok.IssuedAt, tc.want)
		}
	}
	for _, bad := range []string{`{"issuedAt":"tomorrow"}`, `{"issuedAt":12}`} {
		var tok api.Token
		if err := json.Unmarshal([]byte(bad), &tok); err == nil {
			t.Errorf("Unmarshal(%s) accepted", bad)
		}
	}
	if diff := cmp.Diff(`"tomorrow" is not an RFC 3339 time`, json.Unmarshal([]byte(`"tomorrow"`), new(api.Time)).Error()); diff != "" {
		t.Errorf("error (-want +got):\n%s", diff)
	}
}

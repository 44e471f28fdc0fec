package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"unicode/utf8"

	wire "github.com/example/waitingroom/internal/api"
)

// maxNameInMessage caps how much of an unknown or repeated key an error
// message repeats.
const maxNameInMessage = 64

// field is one key a request body may hold: its exact name, where its value
// goes (a pointer to a pointer, left nil when the key is absent) and its JSON
// type, for messages.
type field struct {
	name string
	dst  any
	kind string
}

// decodeObject reads r's body as one JSON object whose keys are among
// fields, spelt exactly, each at most once, none null, and stores each
// value in its field. Its errors are *httpError or *queue.Error.
func decodeObject(r *http.Request, fields ...field) error {
	raw, err := io.ReadAll(r.Body)
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return errTooLarge
	case err != nil:
		return errUnreadable
	case len(bytes.TrimSpace(raw)) == 0:
		return invalidJSON("A JSON object body is required.")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	var obj json.RawMessage
	if err := dec.Decode(&obj); err != nil {
		return invalidJSON(syntaxProblem(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return invalidJSON("The body must hold a single JSON object.")
	}
	if obj[0] != '{' {
		return invalidJSON("The body must be a JSON object.")
	}
	// obj is valid JSON: walking it cannot fail on syntax.
	dec = json.NewDecoder(bytes.NewReader(obj))
	_, _ = dec.Token() // {
	seen := map[string]bool{}
	for dec.More() {
		tok, _ := dec.Token()
		name, _ := tok.(string)
		var value json.RawMessage
		_ = dec.Decode(&value)
		i := indexOf(fields, name)
		switch {
		case i < 0:
			return invalidJSON(fmt.Sprintf("Unknown field %q.", capName(name)))
		case seen[name]:
			return invalidJSON(fmt.Sprintf("Field %q is repeated.", name))
		}
		seen[name] = true
		f := fields[i]
		if string(value) == "null" || json.Unmarshal(value, f.dst) != nil {
			return invalidJSON(fmt.Sprintf("Field %q must be a %s.", f.name, f.kind))
		}
	}
	return nil
}

func indexOf(fields []field, name string) int {
	for i, f := range fields {
		if f.name == name {
			return i
		}
	}
	return -1
}

// capName shortens a client's key to maxNameInMessage runes.
func capName(s string) string {
	if utf8.RuneCountInString(s) <= maxNameInMessage {
		return s
	}
	return string([]rune(s)[:maxNameInMessage]) + "…"
}

func invalidJSON(msg string) error {
	return httpErrorf(http.StatusBadRequest, wire.CodeInvalidJSON, "%s", msg)
}

// syntaxProblem describes a decoding error without echoing the input.
func syntaxProblem(err error) string {
	var syn *json.SyntaxError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("The body is not valid JSON (at byte %d).", syn.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "The body is truncated JSON."
	}
	return "The body is not valid JSON."
}

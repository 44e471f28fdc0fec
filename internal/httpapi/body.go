package httpapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	wire "github.com/example/waitingroom/internal/api"
)

// maxNameInMessage caps the characters of a key that an error message repeats.
const maxNameInMessage = 64

// nullMember is the error of a null member; t is the type of the pointer it was to fill.
type nullMember struct{ t reflect.Type }

func (nullMember) Error() string { return "null" }

// strict are the rules of a body's object: names spelt exactly and at most once (json
// v2's defaults), none unknown, no null; invalid UTF-8 is read as U+FFFD.
var strict = json.JoinOptions(
	json.RejectUnknownMembers(true),
	jsontext.AllowInvalidUTF8(true),
	json.WithUnmarshalers(json.UnmarshalFromFunc(func(dec *jsontext.Decoder, v any) error {
		if dec.PeekKind() == 'n' {
			return nullMember{reflect.TypeOf(v)}
		}
		return json.SkipFunc
	})),
)

// nullable are strict's rules but for null, which leaves a member as if absent:
// what browsers' own objects (PushSubscription.toJSON) send.
var nullable = json.JoinOptions(json.RejectUnknownMembers(true), jsontext.AllowInvalidUTF8(true))

// decodeObject reads r's body as one JSON object into dst, a pointer to a struct whose
// fields are pointers (nil when absent). Its errors are *httpError.
func decodeObject(r *http.Request, dst any) error { return decodeWith(r, dst, strict, false) }

// decodeWith is decodeObject under opts; with optional, an empty body leaves dst as is.
func decodeWith(r *http.Request, dst any, opts json.Options, optional bool) error {
	raw, err := io.ReadAll(r.Body)
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return errTooLarge
	case err != nil:
		return errUnreadable
	case len(bytes.TrimSpace(raw)) == 0 && optional:
		return nil
	case len(bytes.TrimSpace(raw)) == 0:
		return invalidJSON("A JSON object body is required.")
	}
	// The syntax first, as one value: its problems come before the members'.
	dec := jsontext.NewDecoder(bytes.NewReader(raw), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	obj, err := dec.ReadValue()
	if err != nil {
		return invalidJSON(syntaxProblem(err))
	}
	obj = obj.Clone() // valid only until the next read
	if _, err := dec.ReadToken(); !errors.Is(err, io.EOF) {
		return invalidJSON("The body must hold a single JSON object.")
	}
	if obj.Kind() != '{' {
		return invalidJSON("The body must be a JSON object.")
	}
	if err := json.Unmarshal(obj, dst, opts); err != nil {
		return invalidJSON(memberProblem(err))
	}
	return nil
}

// memberProblem describes what json.Unmarshal found wrong with a member.
func memberProblem(err error) string {
	var sem *json.SemanticError
	var syn *jsontext.SyntacticError
	switch {
	case errors.As(err, &syn) && errors.Is(err, jsontext.ErrDuplicateName):
		return fmt.Sprintf("Field %q is repeated.", memberName(syn.JSONPointer))
	case !errors.As(err, &sem):
		return "The body is not valid JSON."
	case errors.Is(err, json.ErrUnknownName):
		return fmt.Sprintf("Unknown field %q.", memberName(sem.JSONPointer))
	}
	t := sem.GoType
	if null, ok := errors.AsType[nullMember](err); ok {
		t = null.t
	}
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	name := memberName(sem.JSONPointer)
	if t == reflect.TypeFor[wire.TextSettings]() {
		return fmt.Sprintf(`Field %q must be an object of texts (displayName, message, notice); to remove a language, set each of its texts to "".`, name)
	}
	return fmt.Sprintf("Field %q must be %s.", name, kindOf(t))
}

// kindOf names the JSON type of a value of Go type t, with its article.
func kindOf(t reflect.Type) string {
	switch {
	case t == nil:
		return "a value"
	case t.Kind() == reflect.Bool:
		return "a boolean"
	case t.Kind() == reflect.String:
		return "a string"
	case t.Kind() == reflect.Struct, t.Kind() == reflect.Map:
		return "an object"
	case t.Kind() == reflect.Slice, t.Kind() == reflect.Array:
		return "an array"
	}
	return "a number"
}

// memberName is the member at p as a message names it: translations.ko.notice, capped.
func memberName(p jsontext.Pointer) string {
	s := strings.Join(slices.Collect(p.Tokens()), ".")
	if utf8.RuneCountInString(s) > maxNameInMessage {
		s = string([]rune(s)[:maxNameInMessage]) + "…"
	}
	return s
}

// invalidJSON is a 400 INVALID_JSON error with msg.
func invalidJSON(msg string) error {
	return httpErrorf(http.StatusBadRequest, wire.CodeInvalidJSON, "%s", msg)
}

// syntaxProblem describes a syntax error without echoing the input.
func syntaxProblem(err error) string {
	var syn *jsontext.SyntacticError
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "The body is truncated JSON."
	case errors.As(err, &syn):
		return fmt.Sprintf("The body is not valid JSON (at byte %d).", syn.ByteOffset+1)
	}
	return "The body is not valid JSON."
}

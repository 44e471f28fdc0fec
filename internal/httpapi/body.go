package httpapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/aws/aws-lambda-go/events"
)

// decodeBody reads req's JSON body into v strictly: one object, no unknown
// fields, the right types, at most MaxBodyBytes.
func decodeBody(req events.APIGatewayV2HTTPRequest, v any) *apiError {
	raw := []byte(req.Body)
	if req.IsBase64Encoded {
		b, err := base64.StdEncoding.DecodeString(req.Body)
		if err != nil {
			return &apiError{http.StatusBadRequest, "INVALID_JSON", "The body is not valid base64."}
		}
		raw = b
	}
	if len(raw) > MaxBodyBytes {
		return errTooLarge
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return &apiError{http.StatusBadRequest, "INVALID_JSON", "A JSON object body is required."}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &apiError{http.StatusBadRequest, "INVALID_JSON", jsonProblem(err)}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return &apiError{http.StatusBadRequest, "INVALID_JSON", "The body must hold a single JSON object."}
	}
	return nil
}

var errTooLarge = &apiError{http.StatusRequestEntityTooLarge, "PAYLOAD_TOO_LARGE", fmt.Sprintf("The body must be at most %d bytes.", MaxBodyBytes)}

// jsonProblem describes a decoding error without echoing the input.
func jsonProblem(err error) string {
	var (
		syn *json.SyntaxError
		typ *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("The body is not valid JSON (at byte %d).", syn.Offset)
	case errors.As(err, &typ):
		if typ.Field != "" {
			return fmt.Sprintf("Field %q must be a %s.", typ.Field, jsonType(typ.Type.Kind().String()))
		}
		return "The body must be a JSON object."
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "The body is truncated JSON."
	}
	if msg := err.Error(); len(msg) > len("json: unknown field ") && msg[:len("json: unknown field ")] == "json: unknown field " {
		return "Unknown field " + msg[len("json: unknown field "):] + "."
	}
	return "The body is not valid JSON."
}

func jsonType(kind string) string {
	switch kind {
	case "int64", "int", "float64":
		return "number"
	case "bool":
		return "boolean"
	case "ptr":
		return "value of the documented type"
	}
	return kind
}

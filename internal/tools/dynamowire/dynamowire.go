// Package dynamowire reads and writes DynamoDB's JSON 1.0 protocol as an http.RoundTripper in front of
// a DynamoDB API sees it: a request's operation and body, and error answers shaped as DynamoDB's.
package dynamowire

import (
	"bytes"
	"encoding/json"
	"hash/crc32"
	"io"
	"maps"
	"net/http"
	"strconv"
	"strings"
)

// Operation returns the operation a request calls, from its X-Amz-Target header ("DynamoDB_20120810.GetItem" gives "GetItem").
func Operation(req *http.Request) string {
	target := req.Header.Get("X-Amz-Target")
	return target[strings.LastIndexByte(target, '.')+1:]
}

// ReadBody reads req's body for a RoundTripper and returns it with a copy of req that carries the same
// bytes, to forward: a RoundTripper must not modify the request it was given.
func ReadBody(req *http.Request) (*http.Request, []byte, error) {
	if req.Body == nil {
		return req, nil, nil
	}
	body, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, nil, err
	}
	req = req.Clone(req.Context())
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return req, body, nil
}

// Error is the body of a DynamoDB error answer named code ("ThrottlingException"), with fields added.
func Error(code, message string, fields map[string]any) []byte {
	v := map[string]any{"__type": "com.amazonaws.dynamodb.v20120810#" + code, "message": message}
	maps.Copy(v, fields)
	body, _ := json.Marshal(v) // strings, and the caller's JSON values
	return body
}

// ErrorResponse is an answer to req with status and body (an Error) and DynamoDB's headers, requestID its request id.
func ErrorResponse(req *http.Request, status int, requestID string, body []byte) *http.Response {
	h := make(http.Header)
	h.Set("Content-Type", "application/x-amz-json-1.0")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Amzn-Requestid", requestID)
	h.Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE(body)), 10))
	return &http.Response{
		Status:        strconv.Itoa(status) + " " + http.StatusText(status),
		StatusCode:    status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}

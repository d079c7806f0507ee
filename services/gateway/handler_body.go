package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v5"
	"google.golang.org/grpc"

	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/services/internal/problem"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/internal/strictjson"
)

// Media types accepted for request bodies.
const (
	mediaJSON       = "application/json"
	mediaMergePatch = "application/merge-patch+json"
	mediaJSONPatch  = "application/json-patch+json"
)

// call runs one backend call bounded by the request timeout and converts its
// error into a domain error.
func call[Req, Resp any](s *Service, c *echo.Context, fn func(context.Context, Req, ...grpc.CallOption) (Resp, error), req Req) (Resp, error) {
	return callCtx(s, c.Request().Context(), fn, req)
}

// callCtx is call under ctx: the operations that HTTP and the queue input
// share take a context, not a request.
func callCtx[Req, Resp any](s *Service, ctx context.Context, fn func(context.Context, Req, ...grpc.CallOption) (Resp, error), req Req) (Resp, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	resp, err := fn(ctx, req)
	if err != nil {
		return resp, backendErr(err)
	}
	return resp, nil
}

// readBody checks the Content-Type and reads at most MaxRequestBytes of
// body. Any type other than the accepted ones is refused with 415 (a body
// without one never gets here: see requireJSON). Every body passes
// strictjson.Check: valid UTF-8, unique keys, no NUL, numbers in range.
func readBody(c *echo.Context, accepted ...string) ([]byte, error) {
	req := c.Request()
	if ct := req.Header.Get(echo.HeaderContentType); ct != "" {
		if !acceptedMediaType(ct, accepted) {
			return nil, &httpError{status: http.StatusUnsupportedMediaType, code: codeUnsupportedMediaType,
				detail: fmt.Sprintf("Content-Type %q is not supported here: use %s", ct, strings.Join(accepted, " or "))}
		}
	}
	if req.ContentLength > names.MaxRequestBytes {
		return nil, tooLarge()
	}
	if req.Body == nil {
		return nil, emptyBody()
	}
	data, err := io.ReadAll(io.LimitReader(req.Body, names.MaxRequestBytes+1))
	if err != nil {
		return nil, bodyReadError(err)
	}
	if len(data) > names.MaxRequestBytes {
		return nil, tooLarge()
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, emptyBody()
	}
	if perr := strictjson.Check(data, ""); perr != nil {
		return nil, perr
	}
	return data, nil
}

// checkRequestText refuses path parameters and query values that cannot be
// stored or compared as text: invalid UTF-8 or NUL characters (%00). The
// error names the parameter.
func checkRequestText(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c *echo.Context) error {
		var errs []problem.FieldError
		for _, p := range c.PathValues() {
			if fe := strictjson.CheckString("/"+p.Name, p.Value); fe != nil {
				errs = append(errs, *fe)
			}
		}
		q := c.QueryParams()
		for _, k := range slices.Sorted(maps.Keys(q)) {
			path := "/" + strictjson.EscapePointer(strings.ToValidUTF8(k, "\uFFFD"))
			if fe := strictjson.CheckString(path, k); fe != nil {
				errs = append(errs, *fe)
				continue
			}
			for _, v := range q[k] {
				if fe := strictjson.CheckString(path, v); fe != nil {
					errs = append(errs, *fe)
					break
				}
			}
		}
		if len(errs) > 0 {
			return problem.New(problem.Invalid, problem.CodeInvalid, "%s: %s", errs[0].Path, errs[0].Message).WithFields(errs...)
		}
		return next(c)
	}
}

func tooLarge() error {
	return problem.New(problem.TooLarge, problem.CodeTooLarge, "the request body is larger than %d bytes", names.MaxRequestBytes)
}

func emptyBody() error {
	return problem.New(problem.Invalid, problem.CodeMalformedJSON, "the request body is empty: a JSON object is required")
}

// decodeStrict decodes one JSON object into v: unknown fields and trailing
// data are refused, and type errors name the field by JSON pointer.
func decodeStrict(data []byte, v any) error {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) > 0 && trimmed[0] != '{' {
		if !json.Valid(trimmed) {
			return malformed(data, nil)
		}
		return problem.New(problem.Invalid, problem.CodeInvalid, "the request body must be a JSON object").
			WithFields(problem.FieldError{Path: "", Message: "must be a JSON object"})
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(data, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return problem.New(problem.Invalid, problem.CodeMalformedJSON, "the request body has data after the JSON object").
			WithFields(problem.FieldError{Path: "", Message: "trailing data after the JSON object"})
	}
	return nil
}

func decodeError(data []byte, err error) error {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		path := fieldPointer(typeErr.Field)
		if fields := stringMapErrors(data, path); len(fields) > 0 {
			return problem.New(problem.Invalid, problem.CodeInvalid, "%s: values must be strings", path).WithFields(fields...)
		}
		msg := fmt.Sprintf("must be %s, not %s", jsonTypeName(typeErr.Type), typeErr.Value)
		return problem.New(problem.Invalid, problem.CodeInvalid, "%s: %s", displayPath(path), msg).
			WithFields(problem.FieldError{Path: path, Message: msg})
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		name, _ = strconv.Unquote(name)
		path := "/" + resource.EscapePointer(name)
		return problem.New(problem.Invalid, problem.CodeInvalid, "unknown field %q", name).
			WithFields(problem.FieldError{Path: path, Message: "unknown field"})
	}
	return malformed(data, err)
}

// stringMapErrors names every non-string value of the labels or annotations
// object at path (encoding/json reports only the map itself).
func stringMapErrors(data []byte, path string) []problem.FieldError {
	field, ok := strings.CutPrefix(path, "/")
	if !ok || (field != "labels" && field != "annotations") {
		return nil
	}
	var top map[string]json.RawMessage
	var entries map[string]json.RawMessage
	if json.Unmarshal(data, &top) != nil || json.Unmarshal(top[field], &entries) != nil {
		return nil
	}
	var out []problem.FieldError
	for _, k := range slices.Sorted(maps.Keys(entries)) {
		var s string
		if json.Unmarshal(entries[k], &s) != nil {
			out = append(out, problem.FieldError{Path: path + "/" + resource.EscapePointer(k), Message: "must be a string"})
		}
	}
	return out
}

func malformed(data []byte, err error) error {
	if err == nil {
		err = json.Unmarshal(data, new(any))
	}
	var syn *json.SyntaxError
	switch {
	case errors.As(err, &syn):
		return problem.New(problem.Invalid, problem.CodeMalformedJSON, "the request body is not valid JSON: %v (at byte %d)", syn, syn.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return problem.New(problem.Invalid, problem.CodeMalformedJSON, "the request body is not valid JSON: unexpected end of input")
	case err != nil:
		return problem.New(problem.Invalid, problem.CodeMalformedJSON, "the request body is not valid JSON: %v", err)
	}
	return problem.New(problem.Invalid, problem.CodeMalformedJSON, "the request body is not valid JSON")
}

// fieldPointer turns encoding/json's dotted field path into a JSON pointer.
// Keys of labels and annotations may contain dots, so everything after
// those fields is one key.
func fieldPointer(field string) string {
	if field == "" {
		return ""
	}
	head, rest, found := strings.Cut(field, ".")
	if !found {
		return "/" + resource.EscapePointer(head)
	}
	switch head {
	case "labels", "annotations":
		return "/" + head + "/" + resource.EscapePointer(rest)
	}
	parts := strings.Split(field, ".")
	for i, p := range parts {
		parts[i] = resource.EscapePointer(p)
	}
	return "/" + strings.Join(parts, "/")
}

func displayPath(p string) string {
	if p == "" {
		return "the request body"
	}
	return p
}

func jsonTypeName(t reflect.Type) string {
	if t == nil {
		return "a valid value"
	}
	if t == reflect.TypeFor[json.RawMessage]() {
		return "a JSON value"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Pointer:
		return jsonTypeName(t.Elem())
	}
	return "a valid value"
}

// decodeJSONBody reads a JSON request body (bounded) and decodes it strictly
// into v.
func decodeJSONBody(c *echo.Context, v any) error {
	data, err := readBody(c, mediaJSON)
	if err != nil {
		return err
	}
	return decodeStrict(data, v)
}

// writeTarget parses what every write to one object starts with: the path
// id and ?dry_run.
func writeTarget(c *echo.Context) (id int64, dry bool, err error) {
	if id, err = pathID(c); err != nil {
		return 0, false, err
	}
	dry, err = dryRun(c)
	return id, dry, err
}

// pathID parses a path id: a positive int64.
func pathID(c *echo.Context) (int64, error) {
	raw := c.Param("id")
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id <= 0 {
		return 0, problem.New(problem.Invalid, problem.CodeInvalid, "%q is not a valid id: ids are positive integers", raw).
			WithFields(problem.FieldError{Path: "/id", Message: "must be a positive integer"})
	}
	return id, nil
}

// dryRun parses ?dry_run=: true, false or absent.
func dryRun(c *echo.Context) (bool, error) {
	switch v := c.QueryParam("dry_run"); v {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	default:
		return false, problem.New(problem.Invalid, problem.CodeInvalid, "dry_run must be true or false, not %q", v).
			WithFields(problem.FieldError{Path: "/dry_run", Message: "must be true or false"})
	}
}

// queryInt parses an optional integer query parameter within [lo, hi].
func queryInt(c *echo.Context, name string, lo, hi int64) (int64, bool, error) {
	raw := c.QueryParam(name)
	if raw == "" {
		return 0, false, nil
	}
	v, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || v < lo || v > hi {
		msg := fmt.Sprintf("must be an integer between %d and %d", lo, hi)
		return 0, false, problem.New(problem.Invalid, problem.CodeInvalid, "%s=%q: %s", name, raw, msg).
			WithFields(problem.FieldError{Path: "/" + name, Message: msg})
	}
	return v, true, nil
}

// fieldsError returns an Invalid error listing errs, or nil.
func fieldsError(detail string, errs []problem.FieldError) error {
	if len(errs) == 0 {
		return nil
	}
	return problem.New(problem.Invalid, problem.CodeInvalid, "%s", detail).WithFields(errs...)
}

// isObject reports whether raw is a JSON object.
func isObject(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && t[0] == '{'
}

// isNull reports whether raw is absent or JSON null.
func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || bytes.Equal(t, []byte("null"))
}

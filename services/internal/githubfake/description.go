package githubfake

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
)

// MakeTarget installs GitHub's OpenAPI description (the npm package
// @octokit/openapi, at the version the Makefile pins) into DescriptionDir.
const MakeTarget = "make github-openapi"

// DescriptionDir is where MakeTarget installs the package, relative to the
// repository's root (git-ignored: the description is far over 1 MiB).
const DescriptionDir = ".cache/github-openapi"

// DescriptionFile is the description of api.github.com inside the package.
const DescriptionFile = "node_modules/@octokit/openapi/generated/api.github.com.json"

// EnvDescription names the description file instead.
const EnvDescription = "NO8S_GITHUB_OPENAPI"

// operations are the REST operations the fake serves, by path template,
// with the methods: the part of the description it is checked against.
var operations = map[string][]string{
	"/repos/{owner}/{repo}/actions/workflows/{workflow_id}/dispatches": {"post"},
	"/repos/{owner}/{repo}/actions/workflows/{workflow_id}/runs":       {"get"},
	"/repos/{owner}/{repo}/actions/runs/{run_id}":                      {"get"},
	"/repos/{owner}/{repo}/actions/runs/{run_id}/jobs":                 {"get"},
	"/repos/{owner}/{repo}/actions/runs/{run_id}/artifacts":            {"get"},
}

// Description is the part of GitHub's published OpenAPI description that
// covers the operations the fake serves, ready to validate exchanges.
type Description struct {
	doc     *openapi3.T
	version string
	// errorSchema is GitHub's error body (components/schemas/basic-error),
	// for answers the operations do not document (401, 404, 422, 403/429
	// rate limits, 5xx).
	errorSchema *openapi3.Schema
	// rateHeader is the schema of the x-ratelimit-* headers.
	rateHeader *openapi3.Schema
}

// DescriptionPath finds the description: $NO8S_GITHUB_OPENAPI, or
// DescriptionFile under DescriptionDir at the root of the repository that
// contains the working directory (the one with go.work).
func DescriptionPath() (string, error) {
	if p := os.Getenv(EnvDescription); p != "" {
		return p, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return filepath.Join(dir, DescriptionDir, DescriptionFile), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.work above the working directory: set " + EnvDescription)
		}
		dir = parent
	}
}

// LoadDescription reads GitHub's description and keeps the operations the
// fake serves, with every component they refer to, unchanged. A missing
// file is an error that names MakeTarget.
func LoadDescription() (*Description, error) {
	path, err := DescriptionPath()
	if err != nil {
		return nil, fmt.Errorf("GitHub's OpenAPI description: %w (run `%s`)", err, MakeTarget)
	}
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("GitHub's OpenAPI description is not installed at %s: run `%s` (it installs the pinned @octokit/openapi from the npm registry)", path, MakeTarget)
	}
	if err != nil {
		return nil, fmt.Errorf("GitHub's OpenAPI description: %w", err)
	}
	var full map[string]any
	if err := json.Unmarshal(raw, &full); err != nil {
		return nil, fmt.Errorf("GitHub's OpenAPI description at %s: %w (run `%s` again)", path, err, MakeTarget)
	}
	sub, err := extract(full)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(sub)
	if err != nil {
		return nil, err
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(b)
	if err != nil {
		return nil, fmt.Errorf("load GitHub's OpenAPI description: %w", err)
	}
	d := &Description{doc: doc}
	if doc.Info != nil {
		d.version = doc.Info.Version
	}
	if ref := doc.Components.Schemas["basic-error"]; ref != nil {
		d.errorSchema = ref.Value
	}
	if h := doc.Components.Headers["x-rate-limit-remaining"]; h != nil && h.Value.Schema != nil {
		d.rateHeader = h.Value.Schema.Value
	}
	if d.errorSchema == nil || d.rateHeader == nil {
		return nil, errors.New("GitHub's OpenAPI description has no basic-error schema or x-rate-limit-remaining header")
	}
	return d, nil
}

// Version is the description's version (the package's).
func (d *Description) Version() string { return d.version }

// extract keeps the served operations of the description and the
// components they refer to, transitively.
func extract(full map[string]any) (map[string]any, error) {
	paths, _ := full["paths"].(map[string]any)
	comps, _ := full["components"].(map[string]any)
	if paths == nil || comps == nil {
		return nil, errors.New("GitHub's OpenAPI description has no paths or components")
	}
	outPaths := map[string]any{}
	for p, methods := range operations {
		item, ok := paths[p].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("GitHub's OpenAPI description has no path %s", p)
		}
		kept := map[string]any{}
		for k, v := range item {
			if slices.Contains(methods, k) || k == "parameters" {
				kept[k] = v
			}
		}
		outPaths[p] = kept
	}
	outComps := map[string]any{}
	var visit func(v any) error
	visit = func(v any) error {
		switch x := v.(type) {
		case map[string]any:
			if ref, ok := x["$ref"].(string); ok {
				kind, name, ok := strings.Cut(strings.TrimPrefix(ref, "#/components/"), "/")
				if !ok || !strings.HasPrefix(ref, "#/components/") {
					return fmt.Errorf("unexpected $ref %s", ref)
				}
				dst, _ := outComps[kind].(map[string]any)
				if dst == nil {
					dst = map[string]any{}
					outComps[kind] = dst
				}
				if _, done := dst[name]; !done {
					src, _ := comps[kind].(map[string]any)
					target, ok := src[name]
					if !ok {
						return fmt.Errorf("dangling $ref %s", ref)
					}
					dst[name] = target
					if err := visit(target); err != nil {
						return err
					}
				}
			}
			for _, c := range x {
				if err := visit(c); err != nil {
					return err
				}
			}
		case []any:
			for _, c := range x {
				if err := visit(c); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := visit(outPaths); err != nil {
		return nil, err
	}
	for _, ref := range []string{"#/components/schemas/basic-error", "#/components/headers/x-rate-limit-remaining",
		"#/components/headers/x-rate-limit-limit", "#/components/headers/x-rate-limit-reset"} {
		if err := visit(map[string]any{"$ref": ref}); err != nil {
			return nil, err
		}
	}
	return map[string]any{"openapi": full["openapi"], "info": full["info"], "paths": outPaths, "components": outComps}, nil
}

// exchange is one request and the answer the fake gave.
type exchange struct {
	req        *http.Request
	reqBody    []byte
	template   string // the path template, as in the description
	pathParams map[string]string
	status     int
	header     http.Header
	body       []byte
}

// route is the description's route for an exchange.
func (d *Description) route(x *exchange) (*routers.Route, error) {
	item := d.doc.Paths.Find(x.template)
	if item == nil {
		return nil, fmt.Errorf("%s is not in the description", x.template)
	}
	op := item.GetOperation(x.req.Method)
	if op == nil {
		return nil, fmt.Errorf("%s %s is not in the description", x.req.Method, x.template)
	}
	return &routers.Route{Spec: d.doc, Path: x.template, PathItem: item, Method: x.req.Method, Operation: op}, nil
}

// validateRequest checks the client's request against the operation.
func (d *Description) validateRequest(ctx context.Context, x *exchange) error {
	route, err := d.route(x)
	if err != nil {
		return err
	}
	r := x.req.Clone(ctx)
	r.Body = io.NopCloser(bytes.NewReader(x.reqBody))
	in := &openapi3filter.RequestValidationInput{Request: r, PathParams: x.pathParams, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true}}
	return openapi3filter.ValidateRequest(ctx, in)
}

// validateResponse checks the fake's answer: against the operation's
// documented response when the status is documented, else against
// GitHub's error body; and GitHub's headers on every answer.
func (d *Description) validateResponse(ctx context.Context, x *exchange) error {
	var errs []error
	for _, h := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "X-RateLimit-Used"} {
		v := x.header.Get(h)
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("header %s %q is not an integer", h, v))
			continue
		}
		if err := d.rateHeader.VisitJSON(float64(n)); err != nil {
			errs = append(errs, fmt.Errorf("header %s: %w", h, err))
		}
	}
	if x.header.Get("X-GitHub-Request-Id") == "" {
		errs = append(errs, errors.New("no X-GitHub-Request-Id header"))
	}
	route, err := d.route(x)
	if err != nil {
		return err
	}
	if route.Operation.Responses.Status(x.status) != nil {
		r := x.req.Clone(ctx)
		r.Body = io.NopCloser(bytes.NewReader(x.reqBody))
		in := &openapi3filter.ResponseValidationInput{
			RequestValidationInput: &openapi3filter.RequestValidationInput{Request: r, PathParams: x.pathParams, Route: route},
			Status:                 x.status, Header: x.header, Body: io.NopCloser(bytes.NewReader(x.body)),
			Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
		}
		if err := openapi3filter.ValidateResponse(ctx, in); err != nil {
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	}
	if x.status < 400 {
		errs = append(errs, fmt.Errorf("status %d is not documented for %s %s", x.status, x.req.Method, x.template))
		return errors.Join(errs...)
	}
	if ct := x.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		errs = append(errs, fmt.Errorf("error answer %d with content type %q", x.status, ct))
	}
	var body any
	if err := json.Unmarshal(x.body, &body); err != nil {
		errs = append(errs, fmt.Errorf("error answer %d is not JSON: %w", x.status, err))
	} else if err := d.errorSchema.VisitJSON(body); err != nil {
		errs = append(errs, fmt.Errorf("error answer %d is not GitHub's basic-error: %w", x.status, err))
	}
	return errors.Join(errs...)
}

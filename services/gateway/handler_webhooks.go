package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/labstack/echo/v5"

	"github.com/no8s/no8s/libs/client"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/internal/problem"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/internal/resourcepb"
	"github.com/no8s/no8s/services/internal/webhookconf"
)

// webhookDoc is the JSON document of an admission webhook registration:
// the API's (libs/client).
type webhookDoc = client.Webhook

// webhookBody is the body of POST /api/v1/admission-webhooks, and the
// registration that a PUT or PATCH of /api/v1/admission-webhooks/{id}
// results in. On POST omitted optional fields take their defaults. A PUT or
// PATCH changes the fields it gives and keeps the rest (null clears an
// optional field); it may carry back the server-assigned fields of a GET: id
// must then match the path, resource_version is a precondition and the
// timestamps are ignored.
type webhookBody struct {
	Name                string          `json:"name"`
	ResourceTypeName    *string         `json:"resource_type_name"`
	ResourceTypeVersion *string         `json:"resource_type_version"`
	Namespaces          []string        `json:"namespaces"`
	WebhookURL          string          `json:"webhook_url"`
	WebhookType         string          `json:"webhook_type"`
	Operations          []string        `json:"operations"`
	TimeoutSeconds      *int            `json:"timeout_seconds"`
	FailurePolicy       *string         `json:"failure_policy"`
	Ordering            *int            `json:"ordering"`
	CABundle            *string         `json:"ca_bundle"`
	ID                  *int64          `json:"id"`
	ResourceVersion     *int64          `json:"resource_version"`
	CreatedAt           json.RawMessage `json:"created_at"`
	UpdatedAt           json.RawMessage `json:"updated_at"`
}

func toWebhookDoc(w *webhookconf.Webhook) *webhookDoc {
	if w == nil {
		return nil
	}
	ops := w.Operations
	if ops == nil {
		ops = []string{}
	}
	return &webhookDoc{
		ID: w.ID, Name: w.Name, ResourceTypeName: orNull(w.ResourceTypeName), ResourceTypeVersion: orNull(w.ResourceTypeVersion),
		Namespaces: orNullList(w.Namespaces),
		WebhookURL: w.URL, WebhookType: w.Type, Operations: ops, TimeoutSeconds: w.TimeoutSeconds,
		FailurePolicy: w.FailurePolicy, Ordering: w.Ordering, CABundle: orNull(w.CABundle),
		ResourceVersion: w.ResourceVersion, CreatedAt: w.CreatedAt, UpdatedAt: w.UpdatedAt,
	}
}

// orNullList is a list as documents show it: null when empty (every
// namespace).
func orNullList(l []string) []string {
	if len(l) == 0 {
		return nil
	}
	return l
}

func orNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// parseWebhook decodes a registration document, applies defaults and
// checks it.
func parseWebhook(data []byte, create bool) (*webhookconf.Webhook, webhookBody, error) {
	var body webhookBody
	if err := decodeStrict(data, &body); err != nil {
		return nil, body, err
	}
	w := &webhookconf.Webhook{
		Name: body.Name, URL: body.WebhookURL, Type: body.WebhookType, Operations: body.Operations,
		TimeoutSeconds: webhookconf.DefaultTimeoutSeconds, FailurePolicy: webhookconf.PolicyFail,
		Namespaces: body.Namespaces,
	}
	var errs []problem.FieldError
	if body.Namespaces != nil && len(body.Namespaces) == 0 {
		errs = append(errs, problem.FieldError{Path: "/namespaces", Message: "must not be empty: use null to match every namespace"})
	}
	optional := func(path string, v *string, dst *string, what string) {
		if v == nil {
			return
		}
		if *v == "" {
			errs = append(errs, problem.FieldError{Path: path, Message: "must not be empty: use null " + what})
			return
		}
		*dst = *v
	}
	optional("/resource_type_name", body.ResourceTypeName, &w.ResourceTypeName, "to match every resource type")
	optional("/resource_type_version", body.ResourceTypeVersion, &w.ResourceTypeVersion, "to match every version")
	optional("/ca_bundle", body.CABundle, &w.CABundle, "to trust the system's roots")
	if body.TimeoutSeconds != nil {
		w.TimeoutSeconds = *body.TimeoutSeconds
	}
	if body.FailurePolicy != nil {
		w.FailurePolicy = *body.FailurePolicy
	}
	if body.Ordering != nil {
		w.Ordering = *body.Ordering
	}
	if create {
		for _, f := range []struct {
			path  string
			given bool
		}{
			{"/id", body.ID != nil}, {"/resource_version", body.ResourceVersion != nil},
			{"/created_at", body.CreatedAt != nil}, {"/updated_at", body.UpdatedAt != nil},
		} {
			if f.given {
				errs = append(errs, problem.FieldError{Path: f.path, Message: "assigned by the server: leave it out"})
			}
		}
	} else if body.ResourceVersion != nil && *body.ResourceVersion < 0 {
		errs = append(errs, problem.FieldError{Path: "/resource_version", Message: "must be a positive integer"})
	}
	errs = append(errs, webhookconf.Validate(w)...)
	if err := fieldsError("invalid admission webhook", errs); err != nil {
		return nil, body, err
	}
	return w, body, nil
}

// checkWebhookAddress refuses a webhook URL whose address the outbound rule
// does not allow (admission checks again at connect time, after resolving).
func (s *Service) checkWebhookAddress(w *webhookconf.Webhook) error {
	if err := s.cfg.Outbound.CheckURL(w.URL); err != nil {
		return fieldsError("invalid admission webhook", []problem.FieldError{{Path: "/webhook_url", Message: err.Error()}})
	}
	return nil
}

func (s *Service) createWebhook(c *echo.Context) error {
	dry, err := dryRun(c)
	if err != nil {
		return err
	}
	data, err := readBody(c, mediaJSON)
	if err != nil {
		return err
	}
	w, _, err := parseWebhook(data, true)
	if err != nil {
		return err
	}
	if err := s.checkWebhookAddress(w); err != nil {
		return err
	}
	resp, err := call(s, c, s.store.CreateAdmissionWebhook, &storev1.CreateAdmissionWebhookRequest{Webhook: resourcepb.WebhookToProto(w), DryRun: dry})
	if err != nil {
		return err
	}
	out := resourcepb.WebhookFromProto(resp.GetWebhook())
	if !dry && out != nil && out.ID != 0 {
		c.Response().Header().Set(echo.HeaderLocation, "/api/v1/admission-webhooks/"+strconv.FormatInt(out.ID, 10))
	}
	return writeJSON(c, http.StatusCreated, toWebhookDoc(out))
}

func (s *Service) listWebhooks(c *echo.Context) error {
	resp, err := call(s, c, s.store.ListAdmissionWebhooks, &storev1.ListAdmissionWebhooksRequest{})
	if err != nil {
		return err
	}
	out := make([]*webhookDoc, 0, len(resp.GetWebhooks()))
	for _, w := range resp.GetWebhooks() {
		out = append(out, toWebhookDoc(resourcepb.WebhookFromProto(w)))
	}
	return writeJSON(c, http.StatusOK, out)
}

func (s *Service) getWebhook(c *echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	resp, err := call(s, c, s.store.GetAdmissionWebhook, &storev1.GetAdmissionWebhookRequest{Id: id})
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, toWebhookDoc(resourcepb.WebhookFromProto(resp.GetWebhook())))
}

// updateWebhook is PUT /api/v1/admission-webhooks/{id}: the fields given
// replace the registration's, the others are kept (as in the seed).
func (s *Service) updateWebhook(c *echo.Context) error {
	return s.changeWebhook(c, mediaJSON)
}

// patchWebhook is PATCH /api/v1/admission-webhooks/{id} with a JSON merge
// patch.
func (s *Service) patchWebhook(c *echo.Context) error {
	return s.changeWebhook(c, mediaMergePatch, mediaJSON)
}

// changeWebhook merges the body (a JSON merge patch: given fields replace,
// null clears, omitted ones are kept) into the current registration and
// stores the result. Without a resource_version precondition, a concurrent
// change is merged again until the request's deadline (raceRetry).
func (s *Service) changeWebhook(c *echo.Context, media ...string) error {
	id, dry, err := writeTarget(c)
	if err != nil {
		return err
	}
	data, err := readBody(c, media...)
	if err != nil {
		return err
	}
	patch, rv, err := parseWebhookPatch(data, id)
	if err != nil {
		return err
	}
	retry := s.raceRetry(c.Request().Context())
	for {
		cur, err := call(s, c, s.store.GetAdmissionWebhook, &storev1.GetAdmissionWebhookRequest{Id: id})
		if err != nil {
			return err
		}
		doc, err := resource.Marshal(toWebhookDoc(resourcepb.WebhookFromProto(cur.GetWebhook())))
		if err != nil {
			return fmt.Errorf("marshal webhook %d: %w", id, err)
		}
		merged, err := jsonpatch.MergePatch(doc, patch)
		if err != nil {
			return problem.New(problem.Invalid, problem.CodeMalformedJSON, "the change cannot be applied: %v", err)
		}
		w, _, err := parseWebhook(merged, false)
		if err != nil {
			return err
		}
		if err := s.checkWebhookAddress(w); err != nil {
			return err
		}
		w.ID = id
		expected := rv
		if expected == 0 {
			expected = cur.GetWebhook().GetResourceVersion()
		}
		resp, err := call(s, c, s.store.UpdateAdmissionWebhook, &storev1.UpdateAdmissionWebhookRequest{
			Webhook: resourcepb.WebhookToProto(w), ExpectedResourceVersion: expected, DryRun: dry,
		})
		if pe := problem.As(err); pe != nil && pe.Code == problem.CodeConflict && rv == 0 {
			if err := retry.again(err); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		return writeJSON(c, http.StatusOK, toWebhookDoc(resourcepb.WebhookFromProto(resp.GetWebhook())))
	}
}

// parseWebhookPatch checks a change of registration id: a JSON object whose
// id, when given, is id. It returns the patch without the server-assigned
// fields, and its resource_version precondition (0 when absent).
func parseWebhookPatch(data []byte, id int64) ([]byte, int64, error) {
	var top map[string]json.RawMessage
	if err := decodeStrict(data, &top); err != nil {
		return nil, 0, err
	}
	var errs []problem.FieldError
	if raw, ok := top["id"]; ok && !isNull(raw) {
		var got int64
		if json.Unmarshal(raw, &got) != nil || got != id {
			errs = append(errs, problem.FieldError{Path: "/id", Message: fmt.Sprintf("must equal the id in the path, %d", id)})
		}
	}
	var rv int64
	if raw, ok := top["resource_version"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &rv); err != nil || rv < 0 {
			errs = append(errs, problem.FieldError{Path: "/resource_version", Message: "must be a positive integer"})
		}
	}
	if err := fieldsError("invalid admission webhook change", errs); err != nil {
		return nil, 0, err
	}
	for _, k := range []string{"id", "resource_version", "created_at", "updated_at"} {
		delete(top, k)
	}
	patch, err := json.Marshal(top)
	if err != nil {
		return nil, 0, fmt.Errorf("re-encode webhook patch: %w", err)
	}
	return patch, rv, nil
}

func (s *Service) deleteWebhook(c *echo.Context) error {
	id, dry, err := writeTarget(c)
	if err != nil {
		return err
	}
	if _, err := call(s, c, s.store.DeleteAdmissionWebhook, &storev1.DeleteAdmissionWebhookRequest{Id: id, DryRun: dry}); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

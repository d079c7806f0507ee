package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/internal/resourcepb"
	"github.com/no8s/no8s/services/internal/webhookconf"
)

// TestWebhookRegistrationRefusesLinkLocal shows that a webhook URL naming a
// link-local address (cloud metadata), in any spelling, is refused at
// registration and update with a field error.
func TestWebhookRegistrationRefusesLinkLocal(t *testing.T) {
	for i, host := range []string{"169.254.169.254", "2852039166", "0xa9fea9fe", "0251.0376.0251.0376", "[::ffff:169.254.169.254]", "[fe80::1]"} {
		unchanged(t, func() {
			do(t, http.MethodPost, "/api/v1/admission-webhooks",
				hook(fmt.Sprintf("metadata-%d.edge.example.com", i), "EdgeHook", "http://"+host+"/latest/meta-data/", "validating")).
				expectError(t, http.StatusBadRequest, "invalid", "/webhook_url")
		})
	}
	w := register(t, hook("public.edge.example.com", "EdgeHook", "https://hooks.example.com/validate", "validating"))
	m := map[string]any{}
	_ = json.Unmarshal(do(t, http.MethodGet, "/api/v1/admission-webhooks/"+strconv.FormatInt(w.ID, 10), nil).Body, &m)
	m["webhook_url"] = "http://2852039166/"
	unchanged(t, func() {
		do(t, http.MethodPut, "/api/v1/admission-webhooks/"+strconv.FormatInt(w.ID, 10), m).
			expectError(t, http.StatusBadRequest, "invalid", "/webhook_url")
	})
}

// TestWebhookConnectRefusesLinkLocal shows the check at connect time: a
// registration that points at the metadata address (written straight to
// the store, as a registration from before the rule would be) is never
// connected to, and the failure says so at once.
func TestWebhookConnectRefusesLinkLocal(t *testing.T) {
	createType(t, "EdgeConnect", "v1", `{"type":"object"}`)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wh := &webhookconf.Webhook{Name: "metadata.connect.example.com", ResourceTypeName: "EdgeConnect", URL: "http://169.254.169.254/latest/meta-data/",
		Type: webhookconf.TypeValidating, Operations: []string{webhookconf.OpCreate}, TimeoutSeconds: 5, FailurePolicy: webhookconf.PolicyFail}
	resp, err := env.store.CreateAdmissionWebhook(ctx, &storev1.CreateAdmissionWebhookRequest{Webhook: resourcepb.WebhookToProto(wh)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		do(t, http.MethodDelete, "/api/v1/admission-webhooks/"+strconv.FormatInt(resp.GetWebhook().GetId(), 10), nil).expect(t, http.StatusNoContent)
		waitWebhooks(t)
	})
	waitWebhooks(t)
	start := time.Now()
	e := do(t, http.MethodPost, "/api/v1/resources", hookResource("EdgeConnect", "meta", map[string]any{})).
		expectError(t, http.StatusServiceUnavailable, "webhook_failed")
	if !strings.Contains(e.Detail, "address not allowed") {
		t.Fatalf("detail %q, want the class \"address not allowed\"", e.Detail)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("refusing took %s: the gateway tried to connect", took)
	}
}

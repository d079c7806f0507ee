package webhook

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/internal/webhookconf"
)

// BenchmarkChainOneWebhook is the cost of one no-op validating webhook in
// the chain, the HTTP round trip over loopback included.
func BenchmarkChainOneWebhook(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var v map[string]json.RawMessage
		_ = json.NewDecoder(r.Body).Decode(&v)
		_, _ = w.Write([]byte(`{"allowed":true}`))
	}))
	defer srv.Close()
	h := testHook("noop", srv.URL, webhookconf.PolicyFail, 5)
	c := &Chain{}
	res := &resource.Resource{Name: "production-pg", ResourceTypeName: "DatabaseCluster", ResourceTypeVersion: "v1",
		Labels: map[string]string{"team": "payments", "environment": "production"},
		Spec:   json.RawMessage(`{"engine":"postgres","engine_version":"15.4","instance_class":"db.large","storage_gb":500,"replicas":2,"backup_retention_days":14,"high_availability":true}`)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Run(b.Context(), Matched{Validating: []*Hook{h}}, Admission{Operation: webhookconf.OpCreate, Resource: res}, nil); err != nil {
			b.Fatal(err)
		}
	}
}

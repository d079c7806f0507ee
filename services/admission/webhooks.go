package admission

import (
	"context"

	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/internal/problem/grpcstatus"
	"github.com/no8s/no8s/services/internal/resourcepb"
	"github.com/no8s/no8s/services/internal/webhookconf"
)

// webhookSource reads the registered webhooks from the store.
type webhookSource struct {
	store storev1.StoreServiceClient
}

func (s webhookSource) ListWebhooks(ctx context.Context, unless string) ([]*webhookconf.Webhook, string, bool, error) {
	resp, err := s.store.ListAdmissionWebhooks(ctx, &storev1.ListAdmissionWebhooksRequest{UnlessSetVersion: unless})
	if err != nil {
		return nil, "", false, grpcstatus.FromStatus(err)
	}
	if resp.GetNotModified() {
		return nil, resp.GetSetVersion(), true, nil
	}
	out := make([]*webhookconf.Webhook, 0, len(resp.GetWebhooks()))
	for _, w := range resp.GetWebhooks() {
		out = append(out, resourcepb.WebhookFromProto(w))
	}
	return out, resp.GetSetVersion(), false, nil
}

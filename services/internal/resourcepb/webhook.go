package resourcepb

import (
	"slices"

	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/internal/webhookconf"
)

// WebhookToProto converts an admission webhook registration to protobuf.
func WebhookToProto(w *webhookconf.Webhook) *storev1.AdmissionWebhook {
	if w == nil {
		return nil
	}
	return &storev1.AdmissionWebhook{
		Id:                  w.ID,
		Name:                w.Name,
		ResourceTypeName:    w.ResourceTypeName,
		ResourceTypeVersion: w.ResourceTypeVersion,
		WebhookUrl:          w.URL,
		WebhookType:         w.Type,
		Operations:          slices.Clone(w.Operations),
		Namespaces:          slices.Clone(w.Namespaces),
		TimeoutSeconds:      int32(w.TimeoutSeconds),
		FailurePolicy:       w.FailurePolicy,
		Ordering:            int32(w.Ordering),
		CaBundle:            w.CABundle,
		ResourceVersion:     w.ResourceVersion,
		CreatedAt:           ts(w.CreatedAt),
		UpdatedAt:           ts(w.UpdatedAt),
	}
}

// WebhookFromProto converts a protobuf admission webhook registration.
func WebhookFromProto(p *storev1.AdmissionWebhook) *webhookconf.Webhook {
	if p == nil {
		return nil
	}
	w := &webhookconf.Webhook{
		ID:                  p.GetId(),
		Name:                p.GetName(),
		ResourceTypeName:    p.GetResourceTypeName(),
		ResourceTypeVersion: p.GetResourceTypeVersion(),
		URL:                 p.GetWebhookUrl(),
		Type:                p.GetWebhookType(),
		Operations:          slices.Clone(p.GetOperations()),
		Namespaces:          slices.Clone(p.GetNamespaces()),
		TimeoutSeconds:      int(p.GetTimeoutSeconds()),
		FailurePolicy:       p.GetFailurePolicy(),
		Ordering:            int(p.GetOrdering()),
		CABundle:            p.GetCaBundle(),
		ResourceVersion:     p.GetResourceVersion(),
	}
	if t := p.GetCreatedAt(); t != nil {
		w.CreatedAt = t.AsTime().UTC()
	}
	if t := p.GetUpdatedAt(); t != nil {
		w.UpdatedAt = t.AsTime().UTC()
	}
	return w
}

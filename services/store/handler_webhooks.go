package store

import (
	"context"

	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/internal/problem"
	"github.com/no8s/no8s/services/internal/resourcepb"
)

func (h *handler) CreateAdmissionWebhook(ctx context.Context, req *storev1.CreateAdmissionWebhookRequest) (*storev1.CreateAdmissionWebhookResponse, error) {
	in := resourcepb.WebhookFromProto(req.GetWebhook())
	if in == nil {
		return nil, toStatus(problem.Invalidf("webhook is required"))
	}
	out, err := h.store.CreateWebhook(ctx, *in, req.GetDryRun())
	if err != nil {
		return nil, toStatus(err)
	}
	return &storev1.CreateAdmissionWebhookResponse{Webhook: resourcepb.WebhookToProto(out)}, nil
}

func (h *handler) GetAdmissionWebhook(ctx context.Context, req *storev1.GetAdmissionWebhookRequest) (*storev1.GetAdmissionWebhookResponse, error) {
	out, err := h.store.GetWebhook(ctx, req.GetId())
	if err != nil {
		return nil, toStatus(err)
	}
	return &storev1.GetAdmissionWebhookResponse{Webhook: resourcepb.WebhookToProto(out)}, nil
}

func (h *handler) ListAdmissionWebhooks(ctx context.Context, req *storev1.ListAdmissionWebhooksRequest) (*storev1.ListAdmissionWebhooksResponse, error) {
	res, err := h.store.ListWebhooks(ctx, req.GetUnlessSetVersion())
	if err != nil {
		return nil, toStatus(err)
	}
	out := &storev1.ListAdmissionWebhooksResponse{SetVersion: res.SetVersion, NotModified: res.NotModified}
	for _, w := range res.Webhooks {
		out.Webhooks = append(out.Webhooks, resourcepb.WebhookToProto(w))
	}
	return out, nil
}

func (h *handler) UpdateAdmissionWebhook(ctx context.Context, req *storev1.UpdateAdmissionWebhookRequest) (*storev1.UpdateAdmissionWebhookResponse, error) {
	in := resourcepb.WebhookFromProto(req.GetWebhook())
	if in == nil {
		return nil, toStatus(problem.Invalidf("webhook is required"))
	}
	out, err := h.store.UpdateWebhook(ctx, *in, req.GetExpectedResourceVersion(), req.GetDryRun())
	if err != nil {
		return nil, toStatus(err)
	}
	return &storev1.UpdateAdmissionWebhookResponse{Webhook: resourcepb.WebhookToProto(out)}, nil
}

func (h *handler) DeleteAdmissionWebhook(ctx context.Context, req *storev1.DeleteAdmissionWebhookRequest) (*storev1.DeleteAdmissionWebhookResponse, error) {
	if err := h.store.DeleteWebhook(ctx, req.GetId(), req.GetDryRun()); err != nil {
		return nil, toStatus(err)
	}
	return &storev1.DeleteAdmissionWebhookResponse{}, nil
}

// Package admission is the admission service: it compiles resource type
// schemas, validates specs and applies their defaults, applies the
// live-reconciler rule to new resources (a type no live reconciler serves is
// refused; an admitted resource carries its reconciler's finalizer), then
// runs the registered admission webhooks (package webhook) before anything
// is stored.
// Compiled schemas are cached per type and version and refreshed when the
// store reports that a type changed; webhooks are polled from the store.
package admission

import (
	"context"
	"log/slog"
	"net"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/no8s/no8s/libs/platform/metrics"
	"github.com/no8s/no8s/libs/platform/outbound"
	admissionv1 "github.com/no8s/no8s/proto/gen/no8s/admission/v1"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/admission/webhook"
	"github.com/no8s/no8s/services/internal/grpcserver"
)

// Service is a running admission service.
type Service struct {
	cfg      Config
	log      *slog.Logger
	handler  *handler
	webhooks *webhook.Registry
	live     *liveTypes
}

// New returns an admission service that reads types and webhooks from
// store. Zero Config durations take their defaults.
func New(cfg Config, store storev1.StoreServiceClient, log *slog.Logger) *Service {
	def := DefaultConfig()
	if cfg.WebhookRefresh <= 0 {
		cfg.WebhookRefresh = def.WebhookRefresh
	}
	if cfg.WebhookChainTimeout <= 0 {
		cfg.WebhookChainTimeout = def.WebhookChainTimeout
	}
	reg := webhook.NewRegistry(webhookSource{store: store}, cfg.WebhookRefresh,
		&outbound.Dialer{Policy: cfg.Outbound, Resolver: cfg.Resolver}, log.With("component", "webhooks"))
	var live *liveTypes
	if cfg.JetStream != nil {
		live = newLiveTypes(cfg.JetStream, log.With("component", "reconcilers"))
	}
	return &Service{cfg: cfg, log: log, webhooks: reg, live: live, handler: &handler{
		cache:    newSchemaCache(store, cfg.Metrics),
		webhooks: reg,
		chain:    &webhook.Chain{Timeout: cfg.WebhookChainTimeout, Log: log.With("component", "webhooks"), Observe: newWebhookMetrics(cfg.Metrics).observe},
		live:     live,
		outbound: cfg.Outbound,
		grants:   cfg.Grants,
	}}
}

// WebhookSetVersion is the version of the webhook set in force ("" before
// the first load); it equals the store's ListAdmissionWebhooks set_version
// once a change has been picked up.
func (s *Service) WebhookSetVersion() string { return s.webhooks.Version() }

// Serve serves gRPC on lis and keeps the webhook registry fresh until ctx
// ends, then stops gracefully.
func (s *Service) Serve(ctx context.Context, lis net.Listener) error {
	srv, hs := grpcserver.New(s.log, append(slices.Clone(s.cfg.GRPCServerOptions), metrics.NewGRPCServer(s.cfg.Metrics).ServerOptions()...)...)
	admissionv1.RegisterAdmissionServiceServer(srv, s.handler)
	s.log.Info("admission serving", "addr", lis.Addr().String())
	regCtx, stopRegistry := context.WithCancel(context.WithoutCancel(ctx))
	regDone := make(chan struct{})
	go func() {
		defer close(regDone)
		_ = s.webhooks.Run(regCtx)
	}()
	liveDone := make(chan struct{})
	go func() {
		defer close(liveDone)
		if s.live != nil {
			s.live.run(regCtx)
		}
	}()
	err := grpcserver.Serve(ctx, srv, hs, lis, s.cfg.ShutdownGrace)
	// The registry stops after the last request has been served.
	stopRegistry()
	<-regDone
	<-liveDone
	s.log.Info("admission stopped")
	return err
}

func cloneResource(r *storev1.Resource) *storev1.Resource {
	return proto.Clone(r).(*storev1.Resource)
}

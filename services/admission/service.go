// Package admission is the admission service: it compiles resource type
// schemas, validates specs and applies their defaults before anything is
// stored. Compiled schemas are cached per type and version and refreshed when
// the store reports that a type changed.
package admission

import (
	"context"
	"log/slog"
	"net"

	"google.golang.org/protobuf/proto"

	admissionv1 "github.com/no8s/no8s/proto/gen/no8s/admission/v1"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/internal/grpcserver"
)

// Service is a running admission service.
type Service struct {
	cfg     Config
	log     *slog.Logger
	handler *handler
}

// New returns an admission service that reads types from store.
func New(cfg Config, store storev1.StoreServiceClient, log *slog.Logger) *Service {
	return &Service{cfg: cfg, log: log, handler: &handler{cache: newSchemaCache(store)}}
}

// Serve serves gRPC on lis until ctx ends, then stops gracefully.
func (s *Service) Serve(ctx context.Context, lis net.Listener) error {
	srv, hs := grpcserver.New()
	admissionv1.RegisterAdmissionServiceServer(srv, s.handler)
	s.log.Info("admission serving", "addr", lis.Addr().String())
	err := grpcserver.Serve(ctx, srv, hs, lis, s.cfg.ShutdownGrace)
	s.log.Info("admission stopped")
	return err
}

func cloneResource(r *storev1.Resource) *storev1.Resource {
	return proto.Clone(r).(*storev1.Resource)
}

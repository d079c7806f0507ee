package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/labstack/echo/v5"

	admissionv1 "github.com/no8s/no8s/proto/gen/no8s/admission/v1"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
)

// Service serves the public REST API.
type Service struct {
	cfg       Config
	store     storev1.StoreServiceClient
	admission admissionv1.AdmissionServiceClient
	log       *slog.Logger
	echo      *echo.Echo
}

// New returns a gateway over the store and admission clients. Zero Config
// fields take their defaults; a nil log discards.
func New(cfg Config, store storev1.StoreServiceClient, admission admissionv1.AdmissionServiceClient, log *slog.Logger) *Service {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Service{cfg: cfg.withDefaults(), store: store, admission: admission, log: log}
	s.echo = s.routes()
	return s
}

// Handler returns the http.Handler (for tests and for embedding).
func (s *Service) Handler() http.Handler { return s.echo }

// Serve serves HTTP on lis until ctx ends, then shuts down gracefully: it
// stops accepting, lets in-flight requests finish within ShutdownGrace and
// then closes what is left.
func (s *Service) Serve(ctx context.Context, lis net.Listener) error {
	srv := &http.Server{
		Handler:           s.echo,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	s.log.Info("gateway serving", "addr", lis.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	select {
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("http serve: %w", err)
	case <-ctx.Done():
	}
	s.log.Info("gateway draining", "grace", s.cfg.ShutdownGrace)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownGrace)
	defer cancel()
	err := srv.Shutdown(sctx)
	if err != nil {
		s.log.Warn("gateway grace period over, closing remaining connections", "error", err)
		_ = srv.Close()
	}
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	s.log.Info("gateway stopped")
	if errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return err
}

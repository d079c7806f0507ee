package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"

	"github.com/labstack/echo/v5"

	"github.com/no8s/no8s/libs/sdk/metrics"
	admissionv1 "github.com/no8s/no8s/proto/gen/no8s/admission/v1"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/gateway/queueinput"
	"github.com/no8s/no8s/services/gateway/watch"
)

// Service serves the public REST API.
type Service struct {
	cfg       Config
	store     storev1.StoreServiceClient
	admission admissionv1.AdmissionServiceClient
	log       *slog.Logger
	echo      *echo.Echo
	// events fans the event stream out to watches; nil without JetStream.
	events *watch.Hub
	// bodySlots holds one token per request body being read.
	bodySlots chan struct{}
	// http records requests by route (no8s_http_...).
	http *metrics.HTTP
}

// New returns a gateway over the store and admission clients. Zero Config
// fields take their defaults; a nil log discards.
func New(cfg Config, store storev1.StoreServiceClient, admission admissionv1.AdmissionServiceClient, log *slog.Logger) *Service {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Service{cfg: cfg.withDefaults(), store: store, admission: admission, log: log}
	s.bodySlots = make(chan struct{}, s.cfg.MaxConcurrentBodyReads)
	s.http = metrics.NewHTTP(s.cfg.Metrics)
	if s.cfg.JetStream != nil {
		s.events = watch.NewHub(s.cfg.JetStream, s.cfg.Watch, s.publishedRevision, log.With("component", "watch"))
		s.events.RegisterMetrics(s.cfg.Metrics)
	}
	s.echo = s.routes()
	return s
}

// Handler returns the http.Handler (for tests and for embedding). Watches
// need RunEvents running beside it; Serve runs it itself.
func (s *Service) Handler() http.Handler { return s.echo }

// RunEvents follows the event stream for watches until ctx ends; then every
// watch ends. It returns at once without JetStream.
func (s *Service) RunEvents(ctx context.Context) error {
	if s.events == nil {
		return nil
	}
	return s.events.Run(ctx)
}

// RunInput serves the queue input until ctx ends (package queueinput):
// requests and queue messages run through Execute, the operations the
// HTTP API runs. It returns at once without JetStream or when the input is
// off.
func (s *Service) RunInput(ctx context.Context) error {
	if s.cfg.JetStream == nil || !s.cfg.Input.Enabled {
		return nil
	}
	cfg := s.cfg.Input.Config
	if cfg.Metrics == nil {
		cfg.Metrics = s.cfg.Metrics
	}
	if cfg.DrainGrace <= 0 {
		cfg.DrainGrace = s.cfg.ShutdownGrace
	}
	return queueinput.New(s.cfg.JetStream, s, cfg, s.log.With("component", "queue-input")).Run(ctx)
}

// Serve serves HTTP on lis until ctx ends, then shuts down gracefully: it
// stops accepting, lets in-flight requests finish within ShutdownGrace and
// then closes what is left. Headers must arrive within ReadHeaderTimeout
// and idle connections close after IdleTimeout; bodies are bounded by
// BodyReadTimeout per request (boundBody), not by a server-wide read or
// write deadline, which would cut event streams.
func (s *Service) Serve(ctx context.Context, lis net.Listener) error {
	srv := &http.Server{
		Handler:           s.echo,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	s.log.Info("gateway serving", "addr", lis.Addr().String())
	// Watches end when ctx ends: the hub stops before the server drains.
	// The queue input stops taking messages then too, and finishes the
	// running ones within the grace.
	ectx, stopEvents := context.WithCancel(ctx)
	eventsDone := make(chan struct{})
	go func() {
		defer close(eventsDone)
		_ = s.RunEvents(ectx)
	}()
	inputDone := make(chan struct{})
	go func() {
		defer close(inputDone)
		if err := s.RunInput(ectx); err != nil {
			s.log.Error("queue input stopped", "err", err)
		}
	}()
	defer func() {
		stopEvents()
		<-eventsDone
		<-inputDone
	}()
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

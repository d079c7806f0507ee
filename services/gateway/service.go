package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"

	"github.com/labstack/echo/v5"
	"google.golang.org/grpc"

	"github.com/no8s/no8s/libs/platform/metrics"
	admissionv1 "github.com/no8s/no8s/proto/gen/no8s/admission/v1"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/gateway/queueinput"
	"github.com/no8s/no8s/services/gateway/watch"
	"github.com/no8s/no8s/services/internal/audit"
	"github.com/no8s/no8s/services/internal/authn"
	"github.com/no8s/no8s/services/internal/authz"
	"github.com/no8s/no8s/services/internal/problem"
	"github.com/no8s/no8s/services/internal/rbac"
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
	// limits holds what each caller takes (handler_limits.go).
	limits *limiter
	// http records requests by route (no8s_http_...).
	http *metrics.HTTP
	// rest holds writes to the REST rules; nil with identities off.
	rest *authz.REST
	// authn says who a request's bearer credential belongs to.
	authn *authn.Authenticator
	// roles decides what a principal may do (handler_authz.go).
	roles *rbac.Cache
	// origins checks cross-origin writes; hosts are the names the public
	// listener answers to (handler_edge.go).
	origins *http.CrossOriginProtection
	hosts   hostList
	// audit records writes and denials; nil without an audit log or
	// stream (handler_audit.go).
	audit *audit.Recorder
}

// NewOverConns returns a gateway over its connections to the store and to
// admission: the store's StoreService, its ReconcileService (cfg.Reconcile)
// and its TokenService (cfg.Tokens), and admission's AdmissionService. The
// binary and no8s dev both build their gateway so.
func NewOverConns(cfg Config, storeConn, admissionConn grpc.ClientConnInterface, log *slog.Logger) *Service {
	cfg.Reconcile = reconcilev1.NewReconcileServiceClient(storeConn)
	cfg.Tokens = storev1.NewTokenServiceClient(storeConn)
	return New(cfg, storev1.NewStoreServiceClient(storeConn), admissionv1.NewAdmissionServiceClient(admissionConn), log)
}

// New returns a gateway over the store and admission clients. Zero Config
// fields take their defaults; a nil log discards.
func New(cfg Config, store storev1.StoreServiceClient, admission admissionv1.AdmissionServiceClient, log *slog.Logger) *Service {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Service{cfg: cfg.withDefaults(), store: store, admission: admission, log: log}
	s.bodySlots = make(chan struct{}, s.cfg.MaxConcurrentBodyReads)
	s.limits = newLimiter(s.cfg.Limits, s.cfg.Metrics)
	s.http = metrics.NewHTTP(s.cfg.Metrics)
	s.authn = newAuthenticator(s.cfg)
	s.roles = s.newRoles()
	// Malformed entries are ServeListeners' error (Config.Validate); here
	// they leave the checks at their strictest: no origin trusted, and only
	// a name that never resolves (RFC 6761's .invalid) allowed as Host.
	var err error
	if s.origins, err = newOriginCheck(s.cfg.AllowedOrigins); err != nil {
		s.origins = http.NewCrossOriginProtection()
	}
	if s.hosts, err = newHostList(s.cfg.AllowedHosts); err != nil {
		s.hosts = hostList{"invalid.invalid"}
	}
	if s.cfg.Identity != nil {
		s.rest = authz.NewREST(s.cfg.Authz, log.With("component", "authz"))
	}
	if s.cfg.JetStream != nil {
		s.events = watch.NewHub(s.cfg.JetStream, s.cfg.Watch, s.publishedRevision, log.With("component", "watch"))
		s.events.RegisterMetrics(s.cfg.Metrics)
	}
	s.audit = newAuditRecorder(s.cfg, s)
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

// Serve serves HTTP on lis until ctx ends (ServeListeners without a
// service listener).
func (s *Service) Serve(ctx context.Context, lis net.Listener) error {
	return s.ServeListeners(ctx, lis, nil)
}

// ServeListeners serves the API on the public listener and, when service
// is not nil, on the service listener too, until ctx ends; then it shuts
// both down gracefully: they stop accepting, in-flight requests finish
// within ShutdownGrace, and what is left is closed. Headers must arrive
// within ReadHeaderTimeout and idle connections close after IdleTimeout;
// bodies are bounded by BodyReadTimeout per request (boundBody), not by a
// server-wide read or write deadline, which would cut event streams.
//
// With Config.TLSCertFile the public listener serves TLS (publicTLS), its
// certificate read again when its files change. Config.Validate's errors
// are returned at once.
//
// The service listener serves the same API over TLS with the gateway's
// identity (Config.Identity), requiring a client certificate from the
// installation's CA: its requests carry their caller's identity
// (authz.HTTPCaller), which the REST rules check. Requests on the public
// listener carry none. A service listener without Config.Identity is an
// error.
func (s *Service) ServeListeners(ctx context.Context, public, service net.Listener) error {
	if service != nil && s.cfg.Identity == nil {
		return errors.New("gateway: the service listener serves with the gateway's identity: set its credentials (--identity-dir)")
	}
	if err := s.cfg.Validate(); err != nil {
		return err
	}
	scheme := "http"
	if s.cfg.TLSCertFile != "" {
		certs, err := newCertReloader(s.cfg.TLSCertFile, s.cfg.TLSKeyFile, s.log.With("component", "tls"))
		if err != nil {
			return fmt.Errorf("gateway: %w", err)
		}
		public, scheme = tls.NewListener(public, publicTLS(certs)), "https"
	}
	servers := []*http.Server{s.httpServer(s.echo)}
	listeners := []net.Listener{public}
	s.log.Info("gateway serving", "addr", public.Addr().String(), "scheme", scheme, "allowed_hosts", s.cfg.AllowedHosts)
	if service != nil {
		servers = append(servers, s.httpServer(s.identified(s.echo)))
		listeners = append(listeners, tls.NewListener(service, s.cfg.Identity.ServerTLS()))
		s.log.Info("gateway serving its service listener", "addr", service.Addr().String(), "identity", s.cfg.Identity.ID().String())
	}
	// Watches end when ctx ends: the hub stops before the servers drain.
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
	// The audit log stops last: the records of the requests and messages
	// finished during the drain are written too.
	stopAudit := s.startAudit(ctx)
	defer func() {
		stopEvents()
		<-eventsDone
		<-inputDone
		stopAudit()
	}()
	errc := make(chan error, len(servers))
	for i, srv := range servers {
		go func() { errc <- srv.Serve(listeners[i]) }()
	}
	var err error
	running := len(servers)
	serveErr := func(e error) {
		if e != nil && !errors.Is(e, http.ErrServerClosed) && err == nil {
			err = fmt.Errorf("http serve: %w", e)
		}
	}
	select {
	case e := <-errc:
		running--
		serveErr(e)
	case <-ctx.Done():
	}
	s.log.Info("gateway draining", "grace", s.cfg.ShutdownGrace)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownGrace)
	defer cancel()
	shutdownErrs := make([]error, len(servers))
	var wg sync.WaitGroup
	for i, srv := range servers {
		wg.Go(func() {
			if e := srv.Shutdown(sctx); e != nil {
				s.log.Warn("gateway grace period over, closing remaining connections", "error", e)
				_ = srv.Close()
				if !errors.Is(e, context.DeadlineExceeded) {
					shutdownErrs[i] = e
				}
			}
		})
	}
	wg.Wait()
	for ; running > 0; running-- {
		serveErr(<-errc)
	}
	if err == nil {
		err = errors.Join(shutdownErrs...)
	}
	s.log.Info("gateway stopped")
	return err
}

// httpServer is one listener's server of h.
func (s *Service) httpServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           s.cfg.Tracing.HTTPHandler(h, "no8s-gateway"),
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
}

// identified puts the caller's identity, read from its verified client
// certificate, in each request's context: the service listener's
// handler. A request without one (which the listener's TLS already
// refuses) is answered 403.
func (s *Service) identified(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r2, err := authz.HTTPCaller(r)
		if err != nil {
			status, body, _ := s.errorDocument(r.Context(), "", problem.New(problem.Forbidden, problem.CodeDenied,
				"the service listener takes callers with a client certificate from the installation's CA: %v", err))
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = w.Write(body)
			return
		}
		next.ServeHTTP(w, r2)
	})
}

// Command no8s-gateway runs the api-gateway: the public REST API.
package main

import (
	"fmt"
	"net"
	"strings"

	"github.com/spf13/cobra"

	"github.com/no8s/no8s/libs/api/subjects"
	"github.com/no8s/no8s/libs/platform/health"
	"github.com/no8s/no8s/libs/platform/identity"
	"github.com/no8s/no8s/libs/platform/metrics"
	"github.com/no8s/no8s/services/gateway"
	"github.com/no8s/no8s/services/internal/audit"
	"github.com/no8s/no8s/services/internal/authn"
	"github.com/no8s/no8s/services/internal/authn/oidc"
	"github.com/no8s/no8s/services/internal/flagenv"
	"github.com/no8s/no8s/services/internal/grpcserver"
	"github.com/no8s/no8s/services/internal/natsconn"
	"github.com/no8s/no8s/services/internal/proc"
)

func main() { proc.Main("no8s-gateway", newCommand(), "listen", "") }

// options are no8s-gateway's flags.
type options struct {
	cfg                                         gateway.Config
	storeAddr, admissionAddr, listen, natsURL   *string
	serviceListen, allowedOrigins, allowedHosts *string
	bootstrapFile, publicPaths, auditLog        *string
	issuers, adminGroups                        *[]string
	service                                     *proc.Flags
}

// newCommand returns no8s-gateway's command.
func newCommand() *cobra.Command {
	o := &options{cfg: gateway.DefaultConfig()}
	cmd := &cobra.Command{
		Use:   "no8s-gateway",
		Short: "Serve the api-gateway: the public REST API",
		Args:  cobra.NoArgs,
		RunE:  func(*cobra.Command, []string) error { return o.run() },
	}
	fs := cmd.Flags()
	cfg := &o.cfg
	o.storeAddr = fs.String("store-addr", "127.0.0.1:7001", "store gRPC address")
	o.admissionAddr = fs.String("admission-addr", "127.0.0.1:7002", "admission gRPC address")
	o.listen = fs.String("listen", ":8000", "HTTP listen address")
	o.serviceListen = fs.String("service-listen", "",
		"HTTPS listen address of the service listener: the same API over TLS with the gateway's identity, client certificates required, for registry-sync and reconcilers (needs --identity-dir; none: off)")
	o.allowedOrigins = fs.String("allowed-origins", "",
		"comma-separated web origins (https://console.example.com) whose pages may send writes from a browser; any other cross-origin browser write is refused, 403 cross_origin")
	o.allowedHosts = fs.String("allowed-hosts", "",
		"comma-separated names the API answers to (Host header, port ignored; *.example.com for any name under it); another is refused, 421 host_not_allowed; probes, metrics and the service listener are not checked (none: any Host)")
	fs.StringVar(&cfg.TLSCertFile, "tls-cert-file", "",
		"PEM certificate (and chain) of the API listener: serve HTTPS, TLS 1.2 or later, re-read when the file changes; needs --tls-key-file (none: plain HTTP)")
	fs.StringVar(&cfg.TLSKeyFile, "tls-key-file", "", "PEM private key of --tls-cert-file")
	o.natsURL = proc.NATSURLFlag(fs, "NATS server URL for watches and the queue input")
	fs.DurationVar(&cfg.Watch.Heartbeat, "watch-heartbeat", 0, "interval of SSE heartbeat comments on idle watches (default 15s)")
	fs.DurationVar(&cfg.Watch.Bookmark, "watch-bookmark", 0, "interval of BOOKMARK events on watches (default 30s)")
	fs.DurationVar(&cfg.Watch.StallTimeout, "watch-stall-timeout", 0, "a watch whose client accepts no data for this long ends with a too_slow event (default 30s)")
	fs.DurationVar(&cfg.Watch.FlushInterval, "watch-flush-interval", 0, "the longest rest a live watch takes after a write, coalescing bursts when many watches are live (live watches / 20,000 s, up to this; under 1 ms none); negative: never rests (default 20ms)")
	fs.DurationVar(&cfg.ReadHeaderTimeout, "read-header-timeout", cfg.ReadHeaderTimeout, "a request's headers must arrive within this")
	fs.DurationVar(&cfg.BodyReadTimeout, "body-read-timeout", cfg.BodyReadTimeout, "a request's body must arrive within this (else 408); also the longest wait for a body-read slot (else 503)")
	fs.DurationVar(&cfg.IdleTimeout, "idle-timeout", cfg.IdleTimeout, "kept-alive connections idle this long are closed")
	fs.IntVar(&cfg.MaxConcurrentBodyReads, "max-body-reads", cfg.MaxConcurrentBodyReads, "request bodies read at once")
	fs.Float64Var(&cfg.RateLimit, "rate-limit", cfg.RateLimit, "requests per second each identity may make (a user, or a source address without a token), 429 rate_limited beyond; 0: no limit")
	fs.IntVar(&cfg.RateBurst, "rate-burst", cfg.RateBurst, "requests an identity may make at once above --rate-limit")
	fs.IntVar(&cfg.MaxWatches, "max-watches-per-identity", cfg.MaxWatches, "event streams each identity may hold open, 429 rate_limited beyond; 0: no limit")
	fs.IntVar(&cfg.MaxBodyReadsPerSource, "max-body-reads-per-source", cfg.MaxBodyReadsPerSource, "request bodies read at once from one source address (of --max-body-reads), 429 rate_limited beyond; 0: no limit")
	fs.BoolVar(&cfg.Input.Enabled, "queue-input", cfg.Input.Enabled, "serve the NATS queue input (docs/queue-input.md)")
	fs.DurationVar(&cfg.Input.AckWait, "input-ack-wait", 0, "queue input: a message held this long without a sign of life is redelivered to another gateway (default 30s)")
	fs.IntVar(&cfg.Input.MaxDeliver, "input-max-deliver", 0, "queue input: deliveries of a message before it is dead-lettered (default 5)")
	fs.IntVar(&cfg.Input.Concurrency, "input-concurrency", 0, "queue input: messages handled at once, requests and queue each (default 32)")
	fs.DurationVar(&cfg.Input.RetryDelay, "input-retry-delay", 0, "queue input: first delay before a retry of a 5xx answer, doubling per delivery (default 1s)")
	fs.StringVar(&cfg.Auth.Mode, "auth", authn.ModeOn, "on: every request but the health probes and /metrics needs a bearer token; none: the API is open to anyone who reaches it")
	o.bootstrapFile = fs.String("bootstrap-token-file", "", "file (mode 0600) holding the first administrator's token, at least 32 characters")
	o.issuers = fs.StringArray("oidc-issuer", nil, "a trusted OIDC issuer of JWT bearer tokens, repeatable: issuer=URL,audience=AUD[,username-claim=sub][,groups-claim=groups][,skew=1m] (docs/security.md)")
	o.adminGroups = fs.StringArray("oidc-admin-group", nil, "a JWT group whose members are administrators, repeatable")
	o.publicPaths = fs.String("public-paths", strings.Join(gateway.DefaultPublicPaths(), ","), "comma-separated paths answered without a token: the probes and /metrics by default; \"none\": every path needs one")
	fs.DurationVar(&cfg.Auth.TokenExpiry, "token-expiry", gateway.DefaultTokenExpiry, "expiry of an API token created without one")
	o.auditLog = fs.String("audit-log", audit.LogStderr,
		"where the audit log goes, one JSON line per write and per denied request: a file (appended to, created 0600), - for stderr (each line tagged \"log\":\"audit\"), none for nowhere")
	fs.BoolVar(&cfg.Audit.Stream, "audit-stream", false,
		"publish the audit records on the JetStream stream "+subjects.AuditStream+" too, created or updated at start")
	fs.DurationVar(&cfg.Audit.MaxAge, "audit-max-age", subjects.AuditMaxAge, "the audit stream keeps records this long")
	fs.Int64Var(&cfg.Audit.MaxBytes, "audit-max-bytes", 0, "the audit stream drops its oldest records beyond this many bytes (0: no limit)")
	proc.OutboundFlag(fs, &cfg.Outbound)
	o.service = proc.ServiceFlags(fs)
	for flag, old := range map[string]string{
		"listen":                    "NO8S_GATEWAY_LISTEN",
		"service-listen":            "NO8S_GATEWAY_SERVICE_LISTEN",
		"allowed-origins":           "NO8S_GATEWAY_ALLOWED_ORIGINS",
		"allowed-hosts":             "NO8S_GATEWAY_ALLOWED_HOSTS",
		"tls-cert-file":             "NO8S_GATEWAY_TLS_CERT_FILE",
		"tls-key-file":              "NO8S_GATEWAY_TLS_KEY_FILE",
		"rate-limit":                "NO8S_GATEWAY_RATE_LIMIT",
		"rate-burst":                "NO8S_GATEWAY_RATE_BURST",
		"max-watches-per-identity":  "NO8S_GATEWAY_MAX_WATCHES_PER_IDENTITY",
		"max-body-reads-per-source": "NO8S_GATEWAY_MAX_BODY_READS_PER_SOURCE",
		"public-paths":              "NO8S_GATEWAY_PUBLIC_PATHS",
	} {
		flagenv.Alias(fs, flag, old)
	}
	return cmd
}

// run serves the API until SIGINT or SIGTERM.
func (o *options) run() error {
	cfg := o.cfg
	sp, err := o.service.Start("gateway")
	if err != nil {
		return err
	}
	defer sp.Stop()
	if *o.bootstrapFile != "" && cfg.Auth.Mode != authn.ModeNone {
		if cfg.Auth.BootstrapToken, err = authn.ReadBootstrapToken(*o.bootstrapFile); err != nil {
			return err
		}
	}
	if len(*o.issuers) > 0 {
		var vs oidc.Verifiers
		for _, spec := range *o.issuers {
			ic, err := oidc.ParseIssuerSpec(spec)
			if err != nil {
				return fmt.Errorf("--oidc-issuer: %w", err)
			}
			v, err := oidc.New(ic, nil, nil)
			if err != nil {
				return fmt.Errorf("--oidc-issuer: %w", err)
			}
			vs = append(vs, v)
		}
		cfg.Auth.JWT = vs
	}
	auditOut, err := audit.OpenLog(*o.auditLog)
	if err != nil {
		return fmt.Errorf("--audit-log: %w", err)
	}
	if auditOut != nil {
		defer auditOut.Close()
		cfg.Audit.Log = auditOut
	}
	cfg.Auth.AdminGroups = *o.adminGroups
	cfg.Auth.PublicPaths = []string{}
	if *o.publicPaths != "none" {
		cfg.Auth.PublicPaths = proc.List(*o.publicPaths)
	}
	if err := cfg.Auth.Validate(); err != nil {
		return err
	}
	cfg.Auth.WarnIfOpen(sp.Log)
	ctx, log := sp.Ctx, sp.Log
	if *o.serviceListen != "" && sp.Identity == nil {
		return fmt.Errorf("--service-listen %s needs the gateway's identity (--identity-dir or $%s): the service listener serves TLS with it and requires client certificates from its CA", *o.serviceListen, identity.EnvDir)
	}
	cfg.Identity, cfg.Authz = sp.Identity, sp.Authz
	cfg.AllowedOrigins, cfg.AllowedHosts = proc.List(*o.allowedOrigins), proc.List(*o.allowedHosts)
	if err := cfg.Validate(); err != nil {
		return err
	}

	storeConn, err := grpcserver.Dial(*o.storeAddr, sp.DialOptions(identity.Store)...)
	if err != nil {
		return err
	}
	defer storeConn.Close()
	admissionConn, err := grpcserver.Dial(*o.admissionAddr, sp.DialOptions(identity.Admission)...)
	if err != nil {
		return err
	}
	defer admissionConn.Close()
	nc, js, err := natsconn.ConnectJetStream(*o.natsURL, "no8s-gateway", sp.Identity, log)
	if err != nil {
		return err
	}
	defer nc.Close()
	cfg.JetStream = js
	cfg.Metrics, cfg.Tracing = sp.Metrics, sp.Tracing
	cfg.Health.Metrics = metrics.Handler(sp.Metrics)
	cfg.Health.Ready = []health.Check{health.GRPC("store", storeConn), health.GRPC("admission", admissionConn), health.NATS(nc)}
	lis, err := net.Listen("tcp", *o.listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	var serviceLis net.Listener
	if *o.serviceListen != "" {
		if serviceLis, err = net.Listen("tcp", *o.serviceListen); err != nil {
			_ = lis.Close()
			return fmt.Errorf("service listen: %w", err)
		}
	}
	return gateway.NewOverConns(cfg, storeConn, admissionConn, log).ServeListeners(ctx, lis, serviceLis)
}

// Command no8s-reconciler runs one of no8s's built-in reconcilers on the SDK's
// worker runtime. Each reconciler is deployable alone; run as many replicas
// of one as you like (they share its work queue, and the store's leases keep
// two attempts on one resource from overlapping).
//
//	no8s-reconciler noop --types DatabaseCluster/v1,Widget/v1 --identity-ca ~/.cache/no8s/dev/identity/ca
//	no8s-reconciler postgres-database --register-type --api-url http://127.0.0.1:8000
//	no8s-reconciler github-workflow --register-type --token-env GITHUB_TOKEN
//	no8s-reconciler tenant --api-url http://127.0.0.1:8000
//
// Flags default from the environment: --nats-url ($NATS_URL), --store-addr
// ($NO8S_STORE_ADDR), --concurrency ($NO8S_MAX_CONCURRENCY), --replica-id
// ($NO8S_REPLICA_ID), --health-listen ($NO8S_HEALTH_LISTEN), --log-level
// ($NO8S_LOG_LEVEL). SIGTERM drains in-flight attempts.
//
// The credentials are $NO8S_IDENTITY_DIR's; for development beside no8s
// dev, --identity-ca DIR ($NO8S_IDENTITY_CA) issues the process its own
// from no8s dev's CA instead (a short-lived certificate for
// reconciler/<name> with exactly the types it serves).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/no8s/no8s/libs/client"
	"math/rand/v2"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/libs/sdk/action"
	"github.com/no8s/no8s/libs/sdk/action/github"
	"github.com/no8s/no8s/libs/sdk/identity"
	"github.com/no8s/no8s/libs/sdk/metrics"
	"github.com/no8s/no8s/libs/sdk/secret"
	"github.com/no8s/no8s/libs/sdk/worker"
	"github.com/no8s/no8s/services/internal/identityca"
	"github.com/no8s/no8s/services/internal/proc"
	"github.com/no8s/no8s/services/reconcilerworker/githubworkflow"
	"github.com/no8s/no8s/services/reconcilerworker/noop"
	"github.com/no8s/no8s/services/reconcilerworker/postgresdb"
	"github.com/no8s/no8s/services/reconcilerworker/tenant"
)

const usage = `usage: no8s-reconciler <reconciler> [flags]

reconcilers:
  noop                --types Type/v1[,Type/v1...]   marks every resource of those types ready
  postgres-database   [--register-type]              PostgresDatabase/v1: a database and its owner role
  github-workflow     [--register-type]              GitHubWorkflow/v1: a GitHub Actions workflow run per generation
  tenant              [--api-url URL]                Tenant/v1: renders and applies each Tenant's resources

run "no8s-reconciler <reconciler> -h" for its flags.
`

func main() {
	proc.Builtins("no8s-reconciler", os.Args[1:], worker.EnvHealthListen, worker.DefaultHealthListen)
	proc.TuneGC()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		stop()
		fmt.Fprintln(os.Stderr, "no8s-reconciler:", err)
		os.Exit(1)
	}
}

// common are the worker runtime's settings, shared by every reconciler.
type common struct {
	vars  map[string]*string
	lease time.Duration
	// identityCA is --identity-ca: a development CA directory to issue
	// this process its own credentials from.
	identityCA string
}

func commonFlags(fs *flag.FlagSet) *common {
	c := &common{vars: map[string]*string{}}
	str := func(name, env, def, help string) {
		c.vars[env] = fs.String(name, envOr(env, def), help+" ($"+env+")")
	}
	str("nats-url", worker.EnvNATSURL, "nats://127.0.0.1:4222", "NATS server URL")
	str("store-addr", worker.EnvStoreAddr, worker.DefaultStoreAddr, "the store's worker address (no8s-store --worker-listen)")
	str("concurrency", worker.EnvMaxConcurrency, strconv.Itoa(worker.DefaultMaxConcurrency), "attempts at once in this replica")
	str("replica-id", worker.EnvReplicaID, "", "this replica's name in lease holders (default host-pid-random)")
	str("health-listen", worker.EnvHealthListen, "", `probe address for /healthz and /readyz ("off" disables; default `+worker.DefaultHealthListen+`, or a free port when that is taken)`)
	str("log-level", worker.EnvLogLevel, "info", "debug, info, warn or error")
	str("log-format", worker.EnvLogFormat, "text", "text or json")
	fs.DurationVar(&c.lease, "lease", envDuration("NO8S_LEASE", worker.DefaultLease), "reconcile lease, whole seconds; a crashed replica's items return after it ($NO8S_LEASE)")
	fs.StringVar(&c.identityCA, "identity-ca", os.Getenv(EnvIdentityCA), "development only: the CA directory of no8s dev (printed at its start); this process issues itself a "+selfValidity.String()+
		" credential for reconciler/<its name> with exactly the types it serves, instead of $"+identity.EnvDir+" ($"+EnvIdentityCA+")")
	return c
}

// runMain runs rec serving types on the worker runtime, with credentials
// issued from --identity-ca when it is set.
func (c *common) runMain(ctx context.Context, rec sdk.Reconciler, types []sdk.TypeRef, opts ...worker.Option) error {
	if c.identityCA != "" {
		dir, err := issueSelf(c.identityCA, rec.Name(), types, os.Getenv, time.Now())
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		c.vars[identity.EnvDir] = &dir
	}
	return worker.RunMain(ctx, rec, types, c.getenv, append(c.options(), opts...)...)
}

// getenv answers the worker runtime's variables from the flags.
func (c *common) getenv(k string) string {
	if p, ok := c.vars[k]; ok {
		return *p
	}
	return os.Getenv(k)
}

func (c *common) options() []worker.Option {
	return []worker.Option{worker.WithLease(c.lease)}
}

// EnvIdentityCA is the environment variable behind --identity-ca.
const EnvIdentityCA = "NO8S_IDENTITY_CA"

// selfValidity is how long a credential issued by --identity-ca lives: a
// development session, not a deployment.
const selfValidity = 24 * time.Hour

// issueSelf issues, from the CA in caDir, the credential of
// reconciler/name serving exactly types, valid for selfValidity, into a
// new private temporary directory it returns (the caller removes it). The
// types are claimed in the CA directory first, so that a type another
// reconciler holds is refused as `no8s identity issue` refuses it. It
// refuses to run beside $NO8S_IDENTITY_DIR: one process, one source of
// credentials.
func issueSelf(caDir, name string, types []sdk.TypeRef, getenv func(string) string, now time.Time) (string, error) {
	if d := getenv(identity.EnvDir); d != "" {
		return "", fmt.Errorf("--identity-ca (%s) and %s=%s both give this reconciler credentials: use one", caDir, identity.EnvDir, d)
	}
	id := identity.ID{Kind: identity.Reconciler, Name: name}
	for _, t := range types {
		id.Types = append(id.Types, t.String())
	}
	if err := id.Validate(); err != nil {
		return "", fmt.Errorf("--identity-ca: %w", err)
	}
	ca, err := identityca.Load(caDir)
	if err != nil {
		return "", fmt.Errorf("--identity-ca: %w", err)
	}
	if err := identityca.ClaimTypes(caDir, id, now.Add(selfValidity), now); err != nil {
		return "", fmt.Errorf("--identity-ca: %w", err)
	}
	dir, err := os.MkdirTemp("", "no8s-reconciler-"+name+"-") // mode 0700
	if err != nil {
		return "", fmt.Errorf("--identity-ca: %w", err)
	}
	if err := ca.IssueTo(dir, id, now, selfValidity); err != nil {
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("--identity-ca: %w", err)
	}
	return dir, nil
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprint(os.Stderr, usage)
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			return nil
		}
		return errors.New("name a reconciler")
	}
	name, args := args[0], args[1:]
	fs := flag.NewFlagSet("no8s-reconciler "+name, flag.ExitOnError)
	c := commonFlags(fs)
	switch name {
	case "noop":
		return runNoop(ctx, fs, c, args)
	case "postgres-database":
		return runPostgres(ctx, fs, c, args)
	case "github-workflow":
		return runGitHub(ctx, fs, c, args)
	case "tenant":
		return runTenant(ctx, fs, c, args)
	}
	fmt.Fprint(os.Stderr, usage)
	return fmt.Errorf("unknown reconciler %q", name)
}

func runNoop(ctx context.Context, fs *flag.FlagSet, c *common, args []string) error {
	types := fs.String("types", os.Getenv("NO8S_NOOP_TYPES"), "comma-separated Type/version list to serve ($NO8S_NOOP_TYPES)")
	name := fs.String("name", envOr("NO8S_NOOP_NAME", noop.DefaultName), "registered name; two noop deployments serving different types need different names ($NO8S_NOOP_NAME)")
	// Knobs for tests and benchmarks: simulated work and stalls.
	delay := fs.String("delay", "", "simulated work per attempt: a duration or a range min-max, such as 5ms-50ms (tests, benchmarks)")
	stallFraction := fs.Float64("stall-fraction", 0, "fraction of attempts that stall, ignoring cancellation (tests)")
	stall := fs.Duration("stall", 0, "how long a stalled attempt hangs (tests)")
	_ = fs.Parse(args)
	list, err := noop.ParseTypes(*types)
	if err != nil {
		return err
	}
	lo, hi, err := parseRange(*delay)
	if err != nil {
		return err
	}
	var rec sdk.Reconciler = noop.New(*name)
	if hi > 0 || (*stallFraction > 0 && *stall > 0) {
		rec = noop.NewWithWork(*name, func(ctx context.Context) {
			if *stallFraction > 0 && rand.Float64() < *stallFraction {
				time.Sleep(*stall) // ignores ctx on purpose: a stuck attempt
				return
			}
			if hi > 0 {
				d := lo + rand.N(hi-lo+1)
				t := time.NewTimer(d)
				defer t.Stop()
				select {
				case <-ctx.Done():
				case <-t.C:
				}
			}
		})
	}
	return c.runMain(ctx, rec, list)
}

func runPostgres(ctx context.Context, fs *flag.FlagSet, c *common, args []string) error {
	register := fs.Bool("register-type", envOr("NO8S_REGISTER_TYPE", "") == "true", "create the PostgresDatabase/v1 resource type when missing, through the public API at --api-url ($NO8S_REGISTER_TYPE=true)")
	apiURL := fs.String("api-url", envOr("NO8S_API_URL", "http://127.0.0.1:8000"), "the api-gateway's URL, where --register-type registers the type ($NO8S_API_URL)")
	envPrefix := fs.String("secret-env-prefix", os.Getenv("NO8S_SECRET_ENV_PREFIX"), "only environment variables with this prefix may be named by connection references ($NO8S_SECRET_ENV_PREFIX)")
	secretDir := fs.String("secret-dir", os.Getenv("NO8S_SECRET_DIR"), "only files under this directory may be named by connection references ($NO8S_SECRET_DIR)")
	_ = fs.Parse(args)
	if *register {
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := postgresdb.RegisterType(rctx, *apiURL, apiHTTPClient(c))
		cancel()
		if err != nil {
			return err
		}
	}
	return c.runMain(ctx, postgresdb.New(), []sdk.TypeRef{postgresdb.Type}, worker.WithSecretResolver(secret.Local{EnvPrefix: *envPrefix, FileDir: *secretDir}))
}

func runGitHub(ctx context.Context, fs *flag.FlagSet, c *common, args []string) error {
	register := fs.Bool("register-type", envOr("NO8S_REGISTER_TYPE", "") == "true", "create the GitHubWorkflow/v1 resource type when missing, through the public API at --api-url ($NO8S_REGISTER_TYPE=true)")
	apiURL := fs.String("api-url", envOr("NO8S_API_URL", "http://127.0.0.1:8000"), "the api-gateway's URL, where --register-type registers the type ($NO8S_API_URL)")
	githubURL := fs.String("github-api-url", envOr("GITHUB_API_URL", github.DefaultBaseURL), "GitHub's REST API; GitHub Enterprise Server: https://HOST/api/v3/ ($GITHUB_API_URL)")
	tokenEnv := fs.String("token-env", envOr("NO8S_GITHUB_TOKEN_ENV", github.DefaultTokenEnv), "the environment variable holding the GitHub token ($NO8S_GITHUB_TOKEN_ENV)")
	tokenFile := fs.String("token-file", os.Getenv("NO8S_GITHUB_TOKEN_FILE"), "a file holding the GitHub token, instead of --token-env ($NO8S_GITHUB_TOKEN_FILE)")
	poll := fs.Duration("poll-interval", envDuration("NO8S_GITHUB_POLL_INTERVAL", github.DefaultPollInterval), "how often a running workflow run is looked at ($NO8S_GITHUB_POLL_INTERVAL)")
	maxInputs := fs.Int("max-inputs", github.DefaultMaxInputs, "workflow_dispatch inputs the server takes, the correlation id included (10 on older GitHub Enterprise Server)")
	findTimeout := fs.Duration("find-timeout", github.DefaultFindTimeout, "how long a run dispatched without its id may stay unlisted")
	_ = fs.Parse(args)
	token := secret.Env(*tokenEnv)
	if *tokenFile != "" {
		token = secret.File(*tokenFile)
	}
	metricsReg := metrics.NewRegistry()
	plugin, err := github.New(github.Config{BaseURL: *githubURL, Token: token, PollInterval: *poll, MaxInputs: *maxInputs, FindTimeout: *findTimeout,
		Metrics: metricsReg})
	if err != nil {
		return err
	}
	reg, err := action.NewRegistry(action.Instrumented(plugin, metricsReg))
	if err != nil {
		return err
	}
	if *register {
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := githubworkflow.RegisterType(rctx, *apiURL, apiHTTPClient(c))
		cancel()
		if err != nil {
			return err
		}
	}
	return c.runMain(ctx, githubworkflow.New(reg), []sdk.TypeRef{githubworkflow.Type}, worker.WithMetrics(metricsReg))
}

func runTenant(ctx context.Context, fs *flag.FlagSet, c *common, args []string) error {
	apiURL := fs.String("api-url", envOr("NO8S_API_URL", "http://127.0.0.1:8000"), "the api-gateway's URL, through which every child resource is written; with $NO8S_IDENTITY_DIR, its service listener (https://…) ($NO8S_API_URL)")
	poll := fs.Duration("ready-poll", envDuration("NO8S_TENANT_READY_POLL", tenant.DefaultReadyPoll), "how soon a Tenant is reconciled again while it waits for a child to be ready or gone, whole seconds ($NO8S_TENANT_READY_POLL)")
	_ = fs.Parse(args)
	// With an identity, the reconciler writes through the gateway's service
	// listener (an https --api-url) as reconciler/tenant.
	var creds []*identity.Credentials
	if dir := c.getenv(identity.EnvDir); dir != "" {
		id, err := identity.Load(dir)
		if err != nil {
			return fmt.Errorf("%s: %w", identity.EnvDir, err)
		}
		creds = append(creds, id)
	}
	api, err := tenant.NewAPIClient(*apiURL, c.getenv(envToken), creds...)
	if err != nil {
		return err
	}
	reg := metrics.NewRegistry()
	return c.runMain(ctx, tenant.New(tenant.Config{API: api, ReadyPoll: *poll, Metrics: reg}), []sdk.TypeRef{tenant.Type}, worker.WithMetrics(reg))
}

// parseRange reads "d" or "min-max".
func parseRange(s string) (lo, hi time.Duration, err error) {
	if s == "" {
		return 0, 0, nil
	}
	a, b, isRange := strings.Cut(s, "-")
	if lo, err = time.ParseDuration(a); err != nil {
		return 0, 0, fmt.Errorf("--delay %q: %w", s, err)
	}
	hi = lo
	if isRange {
		if hi, err = time.ParseDuration(b); err != nil {
			return 0, 0, fmt.Errorf("--delay %q: %w", s, err)
		}
	}
	if lo < 0 || hi < lo {
		return 0, 0, fmt.Errorf("--delay %q: want 0 <= min <= max", s)
	}
	return lo, hi, nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func envDuration(k string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(k)); err == nil {
		return d
	}
	return def
}

// envToken holds the API token a reconciler sends to the public API
// (--register-type, the tenant reconciler without an identity).
const envToken = "NO8S_TOKEN"

// apiHTTPClient is the HTTP client of --register-type: it sends $NO8S_TOKEN.
func apiHTTPClient(c *common) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: client.BearerTransport(nil, c.getenv(envToken), "")}
}

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
// Every flag is read from the environment too, by one rule (package
// flagenv): --store-addr from $NO8S_STORE_ADDR, --concurrency from
// $NO8S_CONCURRENCY, and so on; --help lists each flag's names. SIGTERM
// drains in-flight attempts.
//
// The credentials are $NO8S_IDENTITY_DIR's; for development beside no8s
// dev, --identity-ca DIR ($NO8S_IDENTITY_CA) issues the process its own
// from no8s dev's CA instead (a short-lived certificate for
// reconciler/<name> with exactly the types it serves).
package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/no8s/no8s/libs/client"
	"github.com/no8s/no8s/libs/platform/identity"
	"github.com/no8s/no8s/libs/platform/metrics"
	"github.com/no8s/no8s/libs/platform/secret"
	"github.com/no8s/no8s/libs/platform/tracing/otlp"
	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/libs/sdk/action"
	"github.com/no8s/no8s/libs/sdk/action/github"
	"github.com/no8s/no8s/libs/sdk/worker"
	"github.com/no8s/no8s/services/internal/flagenv"
	"github.com/no8s/no8s/services/internal/identityca"
	"github.com/no8s/no8s/services/internal/proc"
	"github.com/no8s/no8s/services/reconcilerworker/githubworkflow"
	"github.com/no8s/no8s/services/reconcilerworker/noop"
	"github.com/no8s/no8s/services/reconcilerworker/postgresdb"
	"github.com/no8s/no8s/services/reconcilerworker/tenant"
)

func main() {
	proc.Main("no8s-reconciler", newCommand(), "health-listen", worker.DefaultHealthListen)
}

// newCommand returns no8s-reconciler's command: a subcommand per
// reconciler, each with the worker runtime's flags (commonFlags) and its
// own.
func newCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "no8s-reconciler <reconciler>",
		Short: "Run one of no8s's built-in reconcilers on the SDK's worker runtime",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_ = cmd.Usage()
			return errors.New("name a reconciler")
		},
	}
	c := commonFlags(cmd.PersistentFlags())
	cmd.AddCommand(newNoopCommand(c), newPostgresCommand(c), newGitHubCommand(c), newTenantCommand(c))
	return cmd
}

// reconcilerCommand returns the command of one reconciler: run gets a
// context cancelled by SIGINT or SIGTERM.
func reconcilerCommand(use, short string, run func(ctx context.Context) error) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			ctx, stop := proc.SignalContext()
			defer stop()
			return run(ctx)
		},
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

func commonFlags(fs *pflag.FlagSet) *common {
	c := &common{vars: map[string]*string{}}
	str := func(name, env, def, help string) {
		c.vars[env] = fs.String(name, def, help)
	}
	str("nats-url", worker.EnvNATSURL, proc.DefaultNATSURL, "NATS server URL")
	flagenv.Alias(fs, "nats-url", worker.EnvNATSURL)
	str("store-addr", worker.EnvStoreAddr, worker.DefaultStoreAddr, "the store's worker address (no8s-store --worker-listen)")
	str("concurrency", worker.EnvMaxConcurrency, strconv.Itoa(worker.DefaultMaxConcurrency), "attempts at once in this replica")
	flagenv.Alias(fs, "concurrency", worker.EnvMaxConcurrency)
	str("replica-id", worker.EnvReplicaID, "", "this replica's name in lease holders (default host-pid-random)")
	str("health-listen", worker.EnvHealthListen, "", `probe address for /healthz and /readyz ("off" disables; default `+worker.DefaultHealthListen+`, or a free port when that is taken)`)
	str("log-level", worker.EnvLogLevel, "info", "debug, info, warn or error")
	str("log-format", worker.EnvLogFormat, "text", "text or json")
	fs.DurationVar(&c.lease, "lease", worker.DefaultLease, "reconcile lease, whole seconds; a crashed replica's items return after it")
	fs.StringVar(&c.identityCA, "identity-ca", "", "development only: the CA directory of no8s dev (printed at its start); this process issues itself a "+selfValidity.String()+
		" credential for reconciler/<its name> with exactly the types it serves, instead of $"+identity.EnvDir)
	return c
}

// runMain runs rec serving types on the worker runtime, with credentials
// issued from --identity-ca when it is set.
func (c *common) runMain(ctx context.Context, rec worker.Reconciler, types []sdk.TypeRef, opts ...worker.Option) error {
	if c.identityCA != "" {
		dir, err := issueSelf(c.identityCA, rec.Name(), types, os.Getenv, time.Now())
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		c.vars[identity.EnvDir] = &dir
	}
	// Traces as every service process starts them: from the OTEL_*
	// environment, off without an endpoint.
	tr, err := otlp.Start(ctx, "no8s-reconciler-"+rec.Name(), proc.Logger("reconciler-"+rec.Name()))
	if err != nil {
		return err
	}
	defer func() { _ = tr.Shutdown(ctx) }()
	return worker.RunMain(ctx, rec, types, c.getenv, append(append(c.options(), worker.WithTracing(tr)), opts...)...)
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

func newNoopCommand(c *common) *cobra.Command {
	var o struct {
		types, name, delay string
		stallFraction      float64
		stall              time.Duration
	}
	cmd := reconcilerCommand("noop", "Mark every resource of the types named by --types ready", func(ctx context.Context) error {
		return runNoop(ctx, c, o.types, o.name, o.delay, o.stallFraction, o.stall)
	})
	fs := cmd.Flags()
	fs.StringVar(&o.types, "types", "", "comma-separated Type/version list to serve")
	flagenv.Alias(fs, "types", "NO8S_NOOP_TYPES")
	fs.StringVar(&o.name, "name", noop.DefaultName, "registered name; two noop deployments serving different types need different names")
	flagenv.Alias(fs, "name", "NO8S_NOOP_NAME")
	// Knobs for tests and benchmarks: simulated work and stalls.
	fs.StringVar(&o.delay, "delay", "", "simulated work per attempt: a duration or a range min-max, such as 5ms-50ms (tests, benchmarks)")
	fs.Float64Var(&o.stallFraction, "stall-fraction", 0, "fraction of attempts that stall, ignoring cancellation (tests)")
	fs.DurationVar(&o.stall, "stall", 0, "how long a stalled attempt hangs (tests)")
	return cmd
}

func runNoop(ctx context.Context, c *common, types, name, delay string, stallFraction float64, stall time.Duration) error {
	list, err := noop.ParseTypes(types)
	if err != nil {
		return err
	}
	lo, hi, err := parseRange(delay)
	if err != nil {
		return err
	}
	var rec worker.Reconciler = noop.New(name)
	if hi > 0 || (stallFraction > 0 && stall > 0) {
		rec = noop.NewWithWork(name, func(ctx context.Context) {
			if stallFraction > 0 && rand.Float64() < stallFraction {
				time.Sleep(stall) // ignores ctx on purpose: a stuck attempt
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

// registerFlags defines --register-type and --api-url of a reconciler
// that can register its resource type.
func registerFlags(fs *pflag.FlagSet, typ string) (register *bool, apiURL *string) {
	register = fs.Bool("register-type", false, "create the "+typ+" resource type when missing, through the public API at --api-url")
	apiURL = fs.String("api-url", "http://127.0.0.1:8000", "the api-gateway's URL, where --register-type registers the type")
	return register, apiURL
}

// registerType registers a resource type through the API at apiURL when
// register is set.
func registerType(ctx context.Context, c *common, register bool, apiURL string, reg func(context.Context, string, *http.Client) error) error {
	if !register {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return reg(rctx, apiURL, apiHTTPClient(c))
}

func newPostgresCommand(c *common) *cobra.Command {
	var register *bool
	var apiURL, envPrefix, secretDir *string
	cmd := reconcilerCommand("postgres-database", "PostgresDatabase/v1: a database and its owner role", func(ctx context.Context) error {
		if err := registerType(ctx, c, *register, *apiURL, postgresdb.RegisterType); err != nil {
			return err
		}
		return c.runMain(ctx, postgresdb.New(), []sdk.TypeRef{postgresdb.Type}, worker.WithSecretResolver(secret.Local{EnvPrefix: *envPrefix, FileDir: *secretDir}))
	})
	fs := cmd.Flags()
	register, apiURL = registerFlags(fs, "PostgresDatabase/v1")
	envPrefix = fs.String("secret-env-prefix", "", "only environment variables with this prefix may be named by connection references")
	secretDir = fs.String("secret-dir", "", "only files under this directory may be named by connection references")
	return cmd
}

// githubOptions are the github-workflow reconciler's own flags.
type githubOptions struct {
	register                               *bool
	apiURL, githubURL, tokenEnv, tokenFile *string
	poll, findTimeout                      *time.Duration
	maxInputs                              *int
}

func newGitHubCommand(c *common) *cobra.Command {
	o := &githubOptions{}
	cmd := reconcilerCommand("github-workflow", "GitHubWorkflow/v1: a GitHub Actions workflow run per generation", func(ctx context.Context) error {
		return runGitHub(ctx, c, o)
	})
	fs := cmd.Flags()
	o.register, o.apiURL = registerFlags(fs, "GitHubWorkflow/v1")
	o.githubURL = fs.String("github-api-url", github.DefaultBaseURL, "GitHub's REST API; GitHub Enterprise Server: https://HOST/api/v3/")
	flagenv.Alias(fs, "github-api-url", "GITHUB_API_URL")
	o.tokenEnv = fs.String("token-env", github.DefaultTokenEnv, "the environment variable holding the GitHub token")
	flagenv.Alias(fs, "token-env", "NO8S_GITHUB_TOKEN_ENV")
	o.tokenFile = fs.String("token-file", "", "a file holding the GitHub token, instead of --token-env")
	flagenv.Alias(fs, "token-file", "NO8S_GITHUB_TOKEN_FILE")
	o.poll = fs.Duration("poll-interval", github.DefaultPollInterval, "how often a running workflow run is looked at")
	flagenv.Alias(fs, "poll-interval", "NO8S_GITHUB_POLL_INTERVAL")
	o.maxInputs = fs.Int("max-inputs", github.DefaultMaxInputs, "workflow_dispatch inputs the server takes, the correlation id included (10 on older GitHub Enterprise Server)")
	o.findTimeout = fs.Duration("find-timeout", github.DefaultFindTimeout, "how long a run dispatched without its id may stay unlisted")
	return cmd
}

func runGitHub(ctx context.Context, c *common, o *githubOptions) error {
	token := secret.Env(*o.tokenEnv)
	if *o.tokenFile != "" {
		token = secret.File(*o.tokenFile)
	}
	metricsReg := metrics.NewRegistry()
	plugin, err := github.New(github.Config{BaseURL: *o.githubURL, Token: token, PollInterval: *o.poll, MaxInputs: *o.maxInputs, FindTimeout: *o.findTimeout,
		Metrics: metricsReg})
	if err != nil {
		return err
	}
	reg, err := action.NewRegistry(action.Instrumented(plugin, metricsReg))
	if err != nil {
		return err
	}
	if err := registerType(ctx, c, *o.register, *o.apiURL, githubworkflow.RegisterType); err != nil {
		return err
	}
	return c.runMain(ctx, githubworkflow.New(reg), []sdk.TypeRef{githubworkflow.Type}, worker.WithMetrics(metricsReg))
}

func newTenantCommand(c *common) *cobra.Command {
	var apiURL *string
	var poll *time.Duration
	cmd := reconcilerCommand("tenant", "Tenant/v1: renders and applies each Tenant's resources", func(ctx context.Context) error {
		return runTenant(ctx, c, *apiURL, *poll)
	})
	fs := cmd.Flags()
	apiURL = fs.String("api-url", "http://127.0.0.1:8000", "the api-gateway's URL, through which every child resource is written; with $"+identity.EnvDir+", its service listener (https://…)")
	poll = fs.Duration("ready-poll", tenant.DefaultReadyPoll, "at the latest, how soon a Tenant is reconciled again while a child it removes or re-creates is not gone yet (its children's changes reconcile it at once), whole seconds")
	flagenv.Alias(fs, "ready-poll", "NO8S_TENANT_READY_POLL")
	return cmd
}

func runTenant(ctx context.Context, c *common, apiURL string, poll time.Duration) error {
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
	api, err := tenant.NewAPIClient(apiURL, c.getenv(envToken), creds...)
	if err != nil {
		return err
	}
	reg := metrics.NewRegistry()
	// One API client, --api-url's, for the tenant's writes and its
	// attempts' req.API().
	return c.runMain(ctx, tenant.New(tenant.Config{API: api, ReadyPoll: poll, Metrics: reg}), []sdk.TypeRef{tenant.Type},
		worker.WithMetrics(reg), worker.WithAPI(api))
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

// envToken holds the API token a reconciler sends to the public API
// (--register-type, the tenant reconciler without an identity).
const envToken = "NO8S_TOKEN"

// apiHTTPClient is the HTTP client of --register-type: it sends $NO8S_TOKEN.
func apiHTTPClient(c *common) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: client.BearerTransport(nil, c.getenv(envToken), "")}
}

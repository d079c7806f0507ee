package composerun

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/no8s/no8s/libs/client"
)

// The published ports the check's client uses, as docker-compose.yml
// publishes them: the gateway on 8000, its second replica on 8001.
const (
	GatewayPort  = 8000
	Gateway2Port = 8001
)

// Flow is the check run through the gateways' published ports only (but
// for its first step, which knocks at NATS and the store from the client's
// namespace without credentials, and is refused): the README's flow, a TenantRegistry over rows in the file's PostgreSQL, an
// HttpSource served from the client namespace, then SIGKILL of one replica
// of each stateless service and of the scheduler leader, after which a new
// resource still reaches Ready and the children stay Ready. Each step's
// error is a *StepError naming the services it needs.
type Flow struct {
	Run *Run
	// Targets are what the flow talks to and kills; ComposeTargets(Run)
	// when empty.
	Targets Targets
	Log     func(format string, args ...any)
	Timeout time.Duration // per wait; 2 min by default
	client  *http.Client
	api     *client.Client
	feed    *feed
}

// Targets are what the flow talks to, reads and kills, by the run's host
// names.
type Targets struct {
	// API is the gateway's base URL from the client namespace; an https
	// one is checked against RootCAs.
	API string
	// RootCAs are the PEM certificates the client trusts for an https
	// API (the issuer of the gateways' TLS Secret); none: the system's.
	RootCAs []byte
	// AdminTokenFile holds the gateways' bootstrap token (read at each
	// request: it may appear once the run started).
	AdminTokenFile string
	// Credentials is the directory of the issued credentials
	// (reader-events, service-gateway).
	Credentials string
	// NATS and Store are the hosts of NATS (port 4222) and of the store's
	// main listener (port 7001).
	NATS, Store string
	// Postgres is the PostgreSQL the flow fills for a TenantRegistry and
	// reads the scheduler's leader from.
	Postgres PostgresTarget
	// Failover names, for the scheduler leader's holder, the processes to
	// SIGKILL (one replica of every stateless service and the leader) and
	// the API URL to use after.
	Failover func(holder string) (kill []string, api string, err error)
}

// PostgresTarget is a PostgreSQL of the run.
type PostgresTarget struct {
	// Host is the run's host; Name the name the services reach it by (a
	// TenantRegistry's source host).
	Host, Name     string
	User, Password string
}

// ComposeTargets are docker-compose.yml's: the gateways' published ports
// 8000 and 8001, the identity volume, the nats, store and postgres
// services; the failover kills the leader's side (the replicas whose
// store serves it) and goes on through the other gateway.
func ComposeTargets(r *Run) Targets {
	env := map[string]string{}
	if s := r.File.Services["postgres"]; s != nil {
		env = s.Environment
	}
	return Targets{
		API:            fmt.Sprintf("http://127.0.0.1:%d", GatewayPort),
		AdminTokenFile: filepath.Join(r.volumesDir(), identityVol, bootstrapTokenFile),
		Credentials:    filepath.Join(r.volumesDir(), identityVol),
		NATS:           natsService,
		Store:          storeService,
		Postgres:       PostgresTarget{Host: "postgres", Name: "postgres", User: env["POSTGRES_USER"], Password: env["POSTGRES_PASSWORD"]},
		Failover: func(holder string) ([]string, string, error) {
			side, port := "", Gateway2Port
			switch holder {
			case "scheduler":
			case "scheduler-2":
				side, port = "-2", GatewayPort
			default:
				return nil, "", fmt.Errorf("the scheduler leader is %q, not a scheduler of the file", holder)
			}
			var kill []string
			for _, s := range []string{"store", "admission", "gateway", "scheduler", "registry-sync", "reconciler-tenant", "reconciler-noop"} {
				kill = append(kill, s+side)
			}
			return kill, fmt.Sprintf("http://127.0.0.1:%d", port), nil
		},
	}
}

func (f *Flow) logf(format string, args ...any) {
	if f.Log != nil {
		f.Log(format, args...)
	}
}

type step struct {
	name  string
	needs []string
	fn    func(context.Context) error
}

func (f *Flow) init() error {
	if f.Timeout == 0 {
		f.Timeout = 2 * time.Minute
	}
	if f.Targets.API == "" {
		f.Targets = ComposeTargets(f.Run)
	}
	if f.client == nil {
		f.client = f.Run.HTTPClient()
		if len(f.Targets.RootCAs) > 0 {
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(f.Targets.RootCAs) {
				return errors.New("the flow's RootCAs hold no PEM certificate")
			}
			f.client.Transport.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		}
		f.client.Transport = adminToken{base: f.client.Transport, path: f.Targets.AdminTokenFile}
		f.useAPI(f.Targets.API)
	}
	return nil
}

// bootstrapTokenFile is the gateways' bootstrap token in the identity
// volume, which the identity service creates.
const bootstrapTokenFile = "bootstrap.token"

// adminToken sends the bootstrap token of the file at path, read at each
// request: the identity service creates it once the run has started (and a
// release from before authentication has none: nothing is sent).
type adminToken struct {
	base http.RoundTripper
	path string
}

func (a adminToken) RoundTrip(req *http.Request) (*http.Response, error) {
	b, err := os.ReadFile(a.path)
	if err != nil {
		return a.base.RoundTrip(req)
	}
	return client.BearerTransport(a.base, strings.TrimSpace(string(b)), "").RoundTrip(req)
}

func (f *Flow) run(ctx context.Context, s step) error {
	start := time.Now()
	f.logf("step %s ...", s.name)
	if err := s.fn(ctx); err != nil {
		return stepErr(s.name, err, s.needs...)
	}
	f.logf("step %s passed in %s", s.name, time.Since(start).Round(time.Millisecond))
	return nil
}

// Steps runs every step in order and returns the first failure.
func (f *Flow) Steps(ctx context.Context) error {
	if err := f.init(); err != nil {
		return err
	}
	for _, s := range []step{
		{"authenticated", []string{"nats", "store", "identity"}, f.authenticated},
		{"readme-flow", []string{"gateway (published port 8000)", "admission", "store", "scheduler", "reconciler-noop"}, f.readme},
		{"tenant-registry", []string{"registry-sync", "reconciler-tenant", "reconciler-noop", "postgres"}, f.tenants},
		{"http-source", []string{"registry-sync", "reconciler-noop"}, f.httpSource},
		{"failover", []string{"every replica"}, f.failover},
	} {
		if err := f.run(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

type answer struct {
	status int
	body   []byte
}

func (a answer) object() map[string]any {
	var m map[string]any
	_ = json.Unmarshal(a.body, &m)
	return m
}

// useAPI points the check's API client at the gateway's base URL.
func (f *Flow) useAPI(url string) {
	// The URL is well-formed: New cannot fail.
	f.api, _ = client.New(url, client.WithHTTPClient(f.client), client.WithRetries(0),
		client.WithUserAgent("no8s-deploy-check"))
}

// do sends one request through libs/client (Raw: the check reads the
// answers as generic JSON); a string body is a merge patch. An error
// answer is a status, not an error.
func (f *Flow) do(ctx context.Context, method, path string, body any) (answer, error) {
	var raw []byte
	ctype := ""
	switch b := body.(type) {
	case nil:
	case string:
		raw, ctype = []byte(b), "application/merge-patch+json"
	default:
		var err error
		if raw, err = json.Marshal(b); err != nil {
			return answer{}, err
		}
	}
	status, _, data, err := f.api.Raw(ctx, method, path, raw, ctype)
	if client.AsError(err) != nil {
		err = nil
	}
	return answer{status, data}, err
}

// expect does the request and fails unless the answer has status want.
func (f *Flow) expect(ctx context.Context, want int, method, path string, body any) (map[string]any, error) {
	a, err := f.do(ctx, method, path, body)
	if err != nil {
		return nil, err
	}
	if a.status != want {
		return nil, fmt.Errorf("%s %s: %d %s, want %d", method, path, a.status, a.body, want)
	}
	return a.object(), nil
}

// waitFor polls check until it passes or the flow's timeout passes.
func (f *Flow) waitFor(ctx context.Context, what string, check func() error) error {
	deadline := time.Now().Add(f.Timeout)
	for {
		err := check()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %s: %w", what, f.Timeout, err)
		}
		t := time.NewTimer(250 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// createType creates a resource type (a 409 for one that exists is fine).
func (f *Flow) createType(ctx context.Context, body map[string]any) error {
	a, err := f.do(ctx, http.MethodPost, "/api/v1/resource-types", body)
	if err != nil {
		return err
	}
	if a.status != http.StatusCreated && a.status != http.StatusConflict {
		return fmt.Errorf("create type %v: %d %s", body["name"], a.status, a.body)
	}
	return nil
}

// createResource creates a resource, retrying while no live reconciler
// serves its type yet (400 no_reconciler right after a start).
func (f *Flow) createResource(ctx context.Context, body map[string]any) (int64, error) {
	var id int64
	err := f.waitFor(ctx, fmt.Sprintf("create %s %v", body["resource_type_name"], body["name"]), func() error {
		a, err := f.do(ctx, http.MethodPost, "/api/v1/resources", body)
		if err != nil {
			return err
		}
		if a.status != http.StatusCreated {
			return fmt.Errorf("%d %s", a.status, a.body)
		}
		id = int64(a.object()["id"].(float64))
		return nil
	})
	return id, err
}

func (f *Flow) waitReady(ctx context.Context, id int64, check func(map[string]any) error) error {
	return f.waitFor(ctx, fmt.Sprintf("resource %d ready", id), func() error {
		r, err := f.expect(ctx, http.StatusOK, http.MethodGet, fmt.Sprintf("/api/v1/resources/%d", id), nil)
		if err != nil {
			return err
		}
		if r["status"] != "ready" || r["phase"] != "Ready" {
			return fmt.Errorf("status %v phase %v: %v", r["status"], r["phase"], r["status_message"])
		}
		if check != nil {
			return check(r)
		}
		return nil
	})
}

// readme is the README's flow: a type, a resource, Ready, an update that
// is reconciled, a delete that removes it.
func (f *Flow) readme(ctx context.Context) error {
	if err := f.createType(ctx, databaseClusterType()); err != nil {
		return err
	}
	id, err := f.createResource(ctx, map[string]any{"name": "production-pg", "resource_type_name": "DatabaseCluster", "resource_type_version": "v1",
		"spec": map[string]any{"engine": "postgres", "storage_gb": 500}})
	if err != nil {
		return err
	}
	if err := f.waitReady(ctx, id, nil); err != nil {
		return err
	}
	if _, err := f.expect(ctx, http.StatusOK, http.MethodGet, "/api/v1/resources/by-name/DatabaseCluster/v1/production-pg", nil); err != nil {
		return err
	}
	if _, err := f.expect(ctx, http.StatusOK, http.MethodPatch, fmt.Sprintf("/api/v1/resources/%d", id),
		`{"spec": {"storage_gb": 600}, "labels": {"tier": "db"}}`); err != nil {
		return err
	}
	if err := f.waitReady(ctx, id, func(r map[string]any) error {
		if r["observed_generation"] != float64(2) {
			return fmt.Errorf("observed_generation %v, want 2", r["observed_generation"])
		}
		return nil
	}); err != nil {
		return err
	}
	if _, err := f.do(ctx, http.MethodDelete, fmt.Sprintf("/api/v1/resources/%d", id), nil); err != nil {
		return err
	}
	return f.waitFor(ctx, "production-pg deleted", func() error {
		a, err := f.do(ctx, http.MethodGet, fmt.Sprintf("/api/v1/resources/%d", id), nil)
		if err != nil {
			return err
		}
		if a.status != http.StatusNotFound {
			return fmt.Errorf("still there: %d", a.status)
		}
		return nil
	})
}

// postgres connects, from the client namespace, to the file's PostgreSQL
// as its POSTGRES_USER with POSTGRES_PASSWORD.
func (f *Flow) postgres(ctx context.Context, db string) (*pgx.Conn, error) {
	pg := f.Targets.Postgres
	cfg, err := pgx.ParseConfig(fmt.Sprintf("postgres://%s:%s@%s:5432/%s?sslmode=disable", pg.User, pg.Password, f.Run.Addr(pg.Host), db))
	if err != nil {
		return nil, err
	}
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return f.Run.DialContext(ctx, network, addr)
	}
	return pgx.ConnectConfig(ctx, cfg)
}

// databaseClusterType is the README's type.
func databaseClusterType() map[string]any {
	return map[string]any{"name": "DatabaseCluster", "version": "v1", "schema": map[string]any{
		"type": "object", "required": []string{"engine", "storage_gb"}, "properties": map[string]any{
			"engine":     map[string]any{"type": "string", "enum": []string{"postgres", "mysql"}},
			"storage_gb": map[string]any{"type": "integer", "minimum": 10},
			"replicas":   map[string]any{"type": "integer", "default": 0}}}}
}

func webAppType() map[string]any {
	return map[string]any{"name": "WebApp", "version": "v1", "schema": map[string]any{
		"type": "object", "required": []string{"image", "host"}, "properties": map[string]any{
			"image": map[string]any{"type": "string"}, "host": map[string]any{"type": "string"}, "replicas": map[string]any{"type": "integer", "default": 1}}}}
}

// list returns the resources of type/v1 in default by name.
func (f *Flow) list(ctx context.Context, typ string) (map[string]map[string]any, error) {
	a, err := f.do(ctx, http.MethodGet, "/api/v1/resources?resource_type="+typ+"&resource_type_version=v1&limit=1000", nil)
	if err != nil {
		return nil, err
	}
	if a.status != http.StatusOK {
		return nil, fmt.Errorf("list %s: %d %s", typ, a.status, a.body)
	}
	var l []map[string]any
	if err := json.Unmarshal(a.body, &l); err != nil {
		return nil, err
	}
	out := map[string]map[string]any{}
	for _, r := range l {
		if r["deleted_at"] == nil {
			out[r["name"].(string)] = r
		}
	}
	return out, nil
}

// waitAllReady waits until the live resources of typ include names, each
// ready.
func (f *Flow) waitAllReady(ctx context.Context, typ string, names ...string) error {
	return f.waitFor(ctx, fmt.Sprintf("%s %v ready", typ, names), func() error {
		got, err := f.list(ctx, typ)
		if err != nil {
			return err
		}
		for _, n := range names {
			r, ok := got[n]
			if !ok {
				return fmt.Errorf("%s %s missing (have %d)", typ, n, len(got))
			}
			if r["status"] != "ready" {
				return fmt.Errorf("%s %s: status %v phase %v %v", typ, n, r["status"], r["phase"], r["status_message"])
			}
		}
		return nil
	})
}

// tenants: rows in a table of the file's PostgreSQL, a TenantRegistry over
// them and a TenantTemplate with a WebApp child: one Tenant per row, each
// with its WebApp, all ready.
func (f *Flow) tenants(ctx context.Context) error {
	if err := f.createType(ctx, webAppType()); err != nil {
		return err
	}
	admin, err := f.postgres(ctx, "postgres")
	if err != nil {
		return fmt.Errorf("the file's PostgreSQL: %w", err)
	}
	_, err = admin.Exec(ctx, "CREATE DATABASE crm")
	admin.Close(ctx)
	if err != nil {
		return err
	}
	crm, err := f.postgres(ctx, "crm")
	if err != nil {
		return err
	}
	defer crm.Close(ctx)
	if _, err := crm.Exec(ctx, "CREATE TABLE tenants (id text, url text, active text)"); err != nil {
		return err
	}
	if _, err := crm.Exec(ctx, "INSERT INTO tenants VALUES ('acme', 'https://acme.example.com', '1'), ('globex', 'globex.example.com', 'yes'), ('umbrella', 'umbrella.example.com', '0')"); err != nil {
		return err
	}
	if _, err := f.createResource(ctx, map[string]any{"name": "customers", "resource_type_name": "TenantRegistry", "resource_type_version": "v1", "spec": map[string]any{
		"source": map[string]any{"type": "postgres", "host": f.Targets.Postgres.Name, "port": 5432, "database": "crm", "table": "tenants", "username": f.Targets.Postgres.User,
			"passwordRef": map[string]any{"env": "NO8S_REGISTRY_DATASOURCE_PASSWORD"}, "allowPrivilegedLogin": true},
		"syncInterval":  "2s",
		"valueMappings": map[string]any{"uid": "id", "hostOrUrl": "url", "activate": "active"},
	}}); err != nil {
		return err
	}
	if _, err := f.createResource(ctx, map[string]any{"name": "web", "resource_type_name": "TenantTemplate", "resource_type_version": "v1", "spec": map[string]any{
		"registryId": "customers", "resources": []map[string]any{{"id": "app", "typeName": "WebApp", "typeVersion": "v1",
			"nameTemplate": "{{ .uid | lower | trunc63 }}-web", "spec": map[string]any{"image": "nginx", "host": "{{ .host }}"}}}}}); err != nil {
		return err
	}
	if err := f.waitAllReady(ctx, "Tenant", "acme-web", "globex-web"); err != nil {
		return err
	}
	if err := f.waitAllReady(ctx, "WebApp", "acme-web", "globex-web"); err != nil {
		return err
	}
	got, err := f.list(ctx, "Tenant")
	if err != nil {
		return err
	}
	if _, ok := got["umbrella-web"]; ok {
		return errors.New("a Tenant for the inactive row umbrella")
	}
	return nil
}

// feed is an HttpSource's server, in the client namespace.
type feed struct {
	mu    sync.Mutex
	items []map[string]any
	srv   *http.Server
	url   string
}

// FeedPort is the port of the HttpSource's feed in the client namespace
// (fixed, so that a later run on the same volumes serves the same URL).
const FeedPort = 9000

// serveFeed serves the HttpSource's items from the client namespace.
func (f *Flow) serveFeed() error {
	l, err := f.Run.Listen(FeedPort)
	if err != nil {
		return err
	}
	fd := &feed{items: []map[string]any{{"id": "a1", "image": "nginx:1"}, {"id": "b2", "image": "nginx:2"}}}
	fd.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fd.mu.Lock()
		body, _ := json.Marshal(map[string]any{"data": map[string]any{"items": fd.items}})
		fd.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	})}
	_, port, _ := net.SplitHostPort(l.Addr().String())
	fd.url = "http://" + ClientHost + ":" + port + "/inventory"
	go func() { _ = fd.srv.Serve(l) }()
	f.feed = fd
	return nil
}

func (f *Flow) httpSource(ctx context.Context) error {
	if err := f.serveFeed(); err != nil {
		return err
	}
	fd := f.feed
	if _, err := f.createResource(ctx, map[string]any{"name": "inventory", "resource_type_name": "HttpSource", "resource_type_version": "v1", "spec": map[string]any{
		"url": fd.url, "interval": "1s", "timeoutSeconds": 2, "itemsPointer": "/data/items",
		"target":      map[string]any{"typeName": "WebApp", "typeVersion": "v1"},
		"namePointer": "/id",
		"spec":        map[string]any{"image": "{{ .image }}", "host": "{{ .id }}.example.com"},
	}}); err != nil {
		return err
	}
	return f.waitAllReady(ctx, "WebApp", "a1", "b2")
}

// Close stops the feed.
func (f *Flow) Close() {
	if f.feed != nil {
		_ = f.feed.srv.Close()
	}
}

// failover SIGKILLs one replica of every stateless service and the
// scheduler leader (the leader's side: the replicas its store serves),
// then, through the other gateway's published port, a new resource
// reaches Ready, a new row becomes a Tenant with its WebApp, and the
// earlier children are still ready.
func (f *Flow) failover(ctx context.Context) error {
	conn, err := f.postgres(ctx, "no8s")
	if err != nil {
		return err
	}
	var holder string
	err = conn.QueryRow(ctx, "SELECT holder FROM scheduler_state WHERE lease_expires_at > now()").Scan(&holder)
	conn.Close(ctx)
	if err != nil {
		return fmt.Errorf("the scheduler leader: %w", err)
	}
	kill, api, err := f.Targets.Failover(holder)
	if err != nil {
		return err
	}
	for _, s := range kill {
		if err := f.Run.Kill(s, syscall.SIGKILL); err != nil {
			return err
		}
	}
	f.logf("SIGKILLed %v (the scheduler leader was %s); the client now uses %s", kill, holder, api)
	f.client.CloseIdleConnections()
	f.useAPI(api)
	id, err := f.createResource(ctx, map[string]any{"name": "after-failover", "resource_type_name": "DatabaseCluster", "resource_type_version": "v1",
		"spec": map[string]any{"engine": "mysql", "storage_gb": 20}})
	if err != nil {
		return err
	}
	if err := f.waitReady(ctx, id, nil); err != nil {
		return err
	}
	crm, err := f.postgres(ctx, "crm")
	if err != nil {
		return err
	}
	_, err = crm.Exec(ctx, "INSERT INTO tenants VALUES ('initech', 'initech.example.com', '1')")
	crm.Close(ctx)
	if err != nil {
		return err
	}
	f.feed.mu.Lock()
	f.feed.items = append(f.feed.items, map[string]any{"id": "c3", "image": "nginx:3"})
	f.feed.mu.Unlock()
	if err := f.waitAllReady(ctx, "Tenant", "acme-web", "globex-web", "initech-web"); err != nil {
		return err
	}
	if err := f.waitAllReady(ctx, "WebApp", "acme-web", "globex-web", "initech-web", "a1", "b2", "c3"); err != nil {
		return err
	}
	got, err := f.list(ctx, "WebApp")
	if err != nil {
		return err
	}
	names := make([]string, 0, len(got))
	for n := range got {
		names = append(names, n)
	}
	slices.Sort(names)
	f.logf("after failover: WebApps %v ready", names)
	return nil
}

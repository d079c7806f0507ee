package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/types/known/timestamppb"

	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/internal/authn"
)

// limitsGateway serves the package's stack with authentication on (the
// bootstrap token and the store's API tokens), watches included, under
// limits; it records its metrics on reg.
func limitsGateway(t *testing.T, limits Limits) (srv *httptest.Server, reg *prometheus.Registry) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Auth = AuthConfig{BootstrapToken: bootstrapToken}
	cfg.Tokens = storev1.NewTokenServiceClient(env.storeConn)
	cfg.JetStream, cfg.Watch = env.js, watchTestConfig
	cfg.Limits = limits
	reg = prometheus.NewRegistry()
	cfg.Metrics = reg
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	gw := New(cfg, env.store, env.admission, env.log.With("service", "gateway-limits"))
	ctx, cancel := context.WithCancel(env.ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = gw.RunEvents(ctx) }()
	srv = httptest.NewServer(gw.Handler())
	t.Cleanup(func() { cancel(); srv.Close(); <-done })
	return srv, reg
}

// limitedCount is no8s_http_limited_requests_total{limit=kind} on reg.
func limitedCount(t *testing.T, reg *prometheus.Registry, kind limitKind) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "no8s_http_limited_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "limit" && l.GetValue() == kind.String() {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no no8s_http_limited_requests_total{limit=%q}", kind)
	return 0
}

// ownedToken stores an API token of owner, an administrator, valid for an
// hour, and returns its value.
func ownedToken(t *testing.T, owner string) string {
	t.Helper()
	id, hash, value, err := authn.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := storev1.NewTokenServiceClient(env.storeConn).CreateToken(env.ctx, &storev1.CreateTokenRequest{Token: &storev1.Token{
		Id: id, Name: "limits-" + owner, Owner: owner, CreatedBy: owner, ExpiresAt: timestamppb.New(time.Now().Add(time.Hour)), SecretHash: hash,
		// Administrators: the limits are under test here, not the roles.
		Groups: []string{authn.GroupAdmins}}}); err != nil {
		t.Fatal(err)
	}
	return value
}

// limitedAnswer is what a request that may be over a limit was answered.
type limitedAnswer struct {
	status     int
	retryAfter string
	doc        errorDoc
	raw        string
}

// getWith sends GET path to srv with token ("" none).
func getWith(t *testing.T, srv *httptest.Server, path, token string) limitedAnswer {
	t.Helper()
	req, err := http.NewRequestWithContext(env.ctx, http.MethodGet, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return readLimited(t, resp)
}

func readLimited(t *testing.T, resp *http.Response) limitedAnswer {
	t.Helper()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	a := limitedAnswer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), raw: string(data)}
	if resp.StatusCode >= 400 {
		if err := json.Unmarshal(data, &a.doc); err != nil {
			t.Fatalf("status %d: the body is no error document: %v: %s", resp.StatusCode, err, data)
		}
	}
	return a
}

// expectRateLimited fails unless a is a 429 rate_limited error document
// with a Retry-After of at least min seconds; it returns the Retry-After.
func (a limitedAnswer) expectRateLimited(t *testing.T, min int) time.Duration {
	t.Helper()
	if a.status != http.StatusTooManyRequests {
		t.Fatalf("status %d, want 429: %s", a.status, a.raw)
	}
	secs, err := strconv.Atoi(a.retryAfter)
	if err != nil || secs < min {
		t.Fatalf("Retry-After %q, want whole seconds, at least %d", a.retryAfter, min)
	}
	if a.doc.Code != codeRateLimited || a.doc.Detail == "" || a.doc.RequestID == "" || a.doc.Errors == nil {
		t.Fatalf("error document %s, want code %s with a detail, errors and a request id", a.raw, codeRateLimited)
	}
	return time.Duration(secs) * time.Second
}

// TestOWASPAPI4_RateLimitPerIdentity (OWASP API4:2023, unrestricted
// resource consumption): an identity past its burst is answered 429 with
// Retry-After and an error document, while another identity calling from
// the same address is served; once Retry-After has passed, the first is
// served again. The probes are never counted.
func TestOWASPAPI4_RateLimitPerIdentity(t *testing.T) {
	// A token every 2 s: the burst and the refusals below take far less,
	// even on a loaded machine.
	const burst = 3
	srv, reg := limitsGateway(t, Limits{RateLimit: 0.5, RateBurst: burst})
	bob := ownedToken(t, "limits-bob")
	for i := range burst {
		if a := getWith(t, srv, "/api/v1/whoami", bootstrapToken); a.status != http.StatusOK {
			t.Fatalf("request %d of the burst: %d %s", i+1, a.status, a.raw)
		}
	}
	over := getWith(t, srv, "/api/v1/whoami", bootstrapToken)
	wait := over.expectRateLimited(t, 1)
	if wait > 2*time.Second {
		t.Errorf("Retry-After %s, want at most the 2 s a token takes", wait)
	}
	if !strings.Contains(over.doc.Detail, "retry after") {
		t.Errorf("detail %q does not say when to retry", over.doc.Detail)
	}
	// Other routes are counted against the same identity.
	getWith(t, srv, "/api/v1/resource-types", bootstrapToken).expectRateLimited(t, 1)
	if n := limitedCount(t, reg, limitRate); n != 2 {
		t.Errorf("no8s_http_limited_requests_total{limit=rate} %v, want 2", n)
	}
	// Another identity, from the same address, has its own bucket.
	for i := range burst {
		if a := getWith(t, srv, "/api/v1/whoami", bob); a.status != http.StatusOK {
			t.Fatalf("another identity, request %d: %d %s", i+1, a.status, a.raw)
		}
	}
	// The probes and the OpenAPI document are not limited.
	for _, path := range []string{"/healthz", "/readyz", "/health", "/api/v1/openapi.json"} {
		for range 2 * burst {
			if a := getWith(t, srv, path, bootstrapToken); a.status != http.StatusOK {
				t.Fatalf("GET %s: %d %s", path, a.status, a.raw)
			}
		}
	}
	// Waiting Retry-After is enough.
	time.Sleep(wait)
	if a := getWith(t, srv, "/api/v1/whoami", bootstrapToken); a.status != http.StatusOK {
		t.Fatalf("after waiting Retry-After (%s): %d %s", wait, a.status, a.raw)
	}
}

// TestOWASPAPI4_RateLimitWithoutToken: with authentication off every
// caller is anonymous, and the limit applies per source address.
func TestOWASPAPI4_RateLimitWithoutToken(t *testing.T) {
	addr := serveReal(t, func(c *Config) { c.RateLimit, c.RateBurst = 0.5, 2 })
	get := func(client *http.Client) limitedAnswer {
		resp, err := client.Get("http://" + addr + "/api/v1/resource-types")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		return readLimited(t, resp)
	}
	local := &http.Client{}
	for range 2 {
		if a := get(local); a.status != http.StatusOK {
			t.Fatalf("within the burst: %d %s", a.status, a.raw)
		}
	}
	get(local).expectRateLimited(t, 1)
	if a := get(clientFrom("127.0.0.2")); a.status != http.StatusOK {
		t.Fatalf("another source address: %d %s", a.status, a.raw)
	}
}

// clientFrom is an HTTP client whose connections leave from ip (a
// loopback address other than 127.0.0.1 is another source).
func clientFrom(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
}

// TestOWASPAPI4_TooManyWatchesPerIdentity: an identity holding its
// MaxWatches event streams is refused another, 429 with Retry-After;
// another identity still opens one; once one of its streams is closed, the
// identity opens one again.
func TestOWASPAPI4_TooManyWatchesPerIdentity(t *testing.T) {
	srv, reg := limitsGateway(t, Limits{MaxWatches: 2})
	auth := []string{"Authorization", "Bearer " + bootstrapToken}
	first := openWatchWith(t, watchClient(false), srv.URL, "/api/v1/events", 0, auth...)
	openWatchWith(t, watchClient(false), srv.URL, "/api/v1/events?namespace=default", 0, auth...)
	getWith(t, srv, "/api/v1/events", bootstrapToken).expectRateLimited(t, 1)
	if n := limitedCount(t, reg, limitWatches); n != 1 {
		t.Errorf("no8s_http_limited_requests_total{limit=watches} %v, want 1", n)
	}
	// Other requests of the identity are served.
	if a := getWith(t, srv, "/api/v1/whoami", bootstrapToken); a.status != http.StatusOK {
		t.Fatalf("whoami while at the watch limit: %d %s", a.status, a.raw)
	}
	bob := ownedToken(t, "limits-watcher")
	openWatchWith(t, watchClient(false), srv.URL, "/api/v1/events", 0, "Authorization", "Bearer "+bob)

	first.close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ctx, cancel := context.WithCancel(env.ctx)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api/v1/events", nil)
		req.Header.Set("Authorization", "Bearer "+bootstrapToken)
		resp, err := watchClient(false).Do(req)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		status := resp.StatusCode
		if status != http.StatusOK {
			readLimited(t, resp).expectRateLimited(t, 1)
		}
		resp.Body.Close()
		cancel()
		if status == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("a closed watch did not free its slot within 5 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSlowBodiesFromOneSourceDoNotStarveAnother: 200 connections from
// 127.0.0.1 each start a POST body and stall. That address reads at most
// MaxBodyReadsPerSource of them at once; the others are answered 429 at
// once, without waiting for a body-read slot. A POST from 127.0.0.2 is
// then answered about as fast as without them, not after the body read
// timeout.
func TestSlowBodiesFromOneSourceDoNotStarveAnother(t *testing.T) {
	const slow = 200
	perSource := DefaultMaxBodyReadsPerSource
	addr := serveReal(t, func(c *Config) {
		c.MaxConcurrentBodyReads = 64
		c.MaxBodyReadsPerSource = perSource
		c.BodyReadTimeout = 30 * time.Second
	})
	other := clientFrom("127.0.0.2")
	seq := 0
	post := func() time.Duration {
		t.Helper()
		seq++
		start := time.Now()
		resp, err := other.Post("http://"+addr+"/api/v1/namespaces", "application/json",
			strings.NewReader(fmt.Sprintf(`{"name":"slow-bodies-%d-%d"}`, seq, time.Now().UnixNano()%1e6)))
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		took := time.Since(start)
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("POST from 127.0.0.2 after %s: %d %s", took, resp.StatusCode, data)
		}
		return took
	}
	var usual time.Duration
	for range 3 {
		usual = max(usual, post())
	}

	type answer struct {
		status     int
		retryAfter string
		code       string
	}
	answers := make(chan answer, slow)
	for i := range slow {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		t.Cleanup(func() { conn.Close() })
		fmt.Fprintf(conn, "POST /api/v1/resource-types HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"na", addr)
		go func() {
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				return // closed by the test
			}
			var doc errorDoc
			_ = json.NewDecoder(resp.Body).Decode(&doc)
			resp.Body.Close()
			answers <- answer{resp.StatusCode, resp.Header.Get("Retry-After"), doc.Code}
		}()
	}
	// All but perSource are refused at once.
	timeout := time.After(10 * time.Second)
	for i := range slow - perSource {
		select {
		case a := <-answers:
			if a.status != http.StatusTooManyRequests || a.code != codeRateLimited {
				t.Fatalf("slow body answer %d: %d %s, want 429 %s", i+1, a.status, a.code, codeRateLimited)
			}
			if secs, err := strconv.Atoi(a.retryAfter); err != nil || secs < 1 {
				t.Fatalf("slow body answer %d: Retry-After %q, want at least 1", i+1, a.retryAfter)
			}
		case <-timeout:
			t.Fatalf("%d of the %d slow bodies beyond the %d of their address answered 429 within 10 s", i, slow-perSource, perSource)
		}
	}

	took := post()
	bound := max(10*usual, 2*time.Second)
	if took > bound {
		t.Fatalf("a POST from another address took %s with %d slow bodies open (usually %s), want at most %s", took, slow, usual, bound)
	}
	// The bodies being read are still waited for: their address held its
	// share, no more, no less.
	select {
	case a := <-answers:
		t.Fatalf("one of the %d slow bodies being read was answered %d before it arrived", perSource, a.status)
	default:
	}
	t.Logf("a POST from 127.0.0.2: %s with %d slow bodies open from 127.0.0.1, %s without", took, slow, usual)
}

// TestLimitsValidate: negative limits, and a rate without a burst, are
// refused with the flag to fix.
func TestLimitsValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	if err := (Limits{}).Validate(); err != nil {
		t.Fatalf("every limit off: %v", err)
	}
	for name, tc := range map[string]struct {
		l    Limits
		flag string
	}{
		"negative rate":      {Limits{RateLimit: -1, RateBurst: 1}, "--rate-limit"},
		"negative burst":     {Limits{RateLimit: 1, RateBurst: -1}, "--rate-burst"},
		"rate without burst": {Limits{RateLimit: 1}, "--rate-burst"},
		"negative watches":   {Limits{MaxWatches: -1}, "--max-watches-per-identity"},
		"negative bodies":    {Limits{MaxBodyReadsPerSource: -2}, "--max-body-reads-per-source"},
	} {
		if err := tc.l.Validate(); err == nil || !strings.Contains(err.Error(), tc.flag) {
			t.Errorf("%s: %v, want an error naming %s", name, err, tc.flag)
		}
	}
	cfg := DefaultConfig()
	cfg.MaxWatches = -1
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "--max-watches-per-identity") {
		t.Errorf("Config.Validate with a negative limit: %v", err)
	}
}

// TestRateBucketsBounded: buckets unused for a minute and full again are
// dropped; past maxRateKeys one is dropped for each new identity; a
// refusal counts nothing and says how long to wait.
func TestRateBucketsBounded(t *testing.T) {
	b := newRateBuckets(2, 2)
	now := time.Now()
	for i := range 2 {
		if wait := b.take("a", now); wait != 0 {
			t.Fatalf("request %d of the burst was refused: wait %s", i+1, wait)
		}
	}
	if wait := b.take("a", now); wait <= 0 || wait > time.Second/2 {
		t.Fatalf("over the burst: wait %s, want (0, 500ms]", wait)
	}
	if wait := b.take("a", now); wait <= 0 || wait > time.Second/2 {
		t.Fatalf("a refusal counted: wait %s, want (0, 500ms]", wait)
	}
	if b.take("b", now.Add(time.Second)) != 0 || b.len() != 2 {
		t.Fatalf("%d buckets, want 2", b.len())
	}
	// A minute on, a is idle and full again; b was used since.
	b.take("b", now.Add(rateIdle-time.Second))
	b.take("c", now.Add(rateIdle+time.Second))
	if b.len() != 2 {
		t.Fatalf("%d buckets after the sweep, want 2 (b and c)", b.len())
	}
	full := newRateBuckets(1, 1)
	for i := range maxRateKeys + 10 {
		full.take(strconv.Itoa(i), now)
	}
	if full.len() != maxRateKeys {
		t.Fatalf("%d buckets, want the bound %d", full.len(), maxRateKeys)
	}
	for d, want := range map[time.Duration]int{time.Millisecond: 1, time.Second: 1, 1001 * time.Millisecond: 2, 4500 * time.Millisecond: 5} {
		if got := retryAfterSeconds(d); got != want {
			t.Errorf("retryAfterSeconds(%s) = %d, want %d", d, got, want)
		}
	}
}

// TestSourceKey: a source is the peer's IP address, an IPv6 one by its /64.
func TestSourceKey(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:5000":             "127.0.0.1",
		"[::ffff:10.0.0.1]:80":       "10.0.0.1",
		"[2001:db8:1:2:3:4:5:6]:443": "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::1]:443": "2001:db8:1:2::/64",
		"[fe80::1%eth0]:80":          "fe80::/64",
		"not an address":             "not an address",
	} {
		if got := sourceKey(in); got != want {
			t.Errorf("sourceKey(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestOWASPAPI4_RefusedCredentialsLimitedPerSource: requests whose
// credentials are refused have no identity; they count against their
// source address, which past its burst is answered 429 before its
// credentials are looked at (a valid token from it too, until a token
// refills); another address is served.
func TestOWASPAPI4_RefusedCredentialsLimitedPerSource(t *testing.T) {
	const burst = 3
	srv, reg := limitsGateway(t, Limits{RateLimit: 0.5, RateBurst: burst})
	for i := range burst {
		if a := getWith(t, srv, "/api/v1/whoami", "wrong-token"); a.status != http.StatusUnauthorized {
			t.Fatalf("refused credentials %d: %d %s, want 401", i+1, a.status, a.raw)
		}
	}
	getWith(t, srv, "/api/v1/whoami", "wrong-token").expectRateLimited(t, 1)
	getWith(t, srv, "/api/v1/whoami", bootstrapToken).expectRateLimited(t, 1)
	if n := limitedCount(t, reg, limitRefusedCredentials); n != 2 {
		t.Errorf("no8s_http_limited_requests_total{limit=refused_credentials} %v, want 2", n)
	}
	req, _ := http.NewRequestWithContext(env.ctx, http.MethodGet, srv.URL+"/api/v1/whoami", nil)
	req.Header.Set("Authorization", "Bearer "+bootstrapToken)
	resp, err := clientFrom("127.0.0.2").Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if a := readLimited(t, resp); a.status != http.StatusOK {
		t.Fatalf("a valid token from another address: %d %s", a.status, a.raw)
	}
	// The probes are not limited.
	if a := getWith(t, srv, "/readyz", ""); a.status != http.StatusOK {
		t.Fatalf("GET /readyz: %d %s", a.status, a.raw)
	}
}

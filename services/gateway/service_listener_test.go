package gateway

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v5"

	"github.com/no8s/no8s/libs/api/fence"
	"github.com/no8s/no8s/libs/platform/identity"
	"github.com/no8s/no8s/services/gateway/queueinput"
	"github.com/no8s/no8s/services/internal/authz"
	"github.com/no8s/no8s/services/internal/authz/authztest"
	"github.com/no8s/no8s/services/internal/identityca"
)

func TestServiceListenerNeedsIdentity(t *testing.T) {
	gw := New(testConfig(), env.store, env.admission, nil)
	pub, _ := net.Listen("tcp", "127.0.0.1:0")
	svc, _ := net.Listen("tcp", "127.0.0.1:0")
	defer pub.Close()
	defer svc.Close()
	err := gw.ServeListeners(t.Context(), pub, svc)
	if err == nil || !strings.Contains(err.Error(), "--identity-dir") {
		t.Fatalf("ServeListeners without an identity: %v", err)
	}
}

// TestServiceListenerIdentifiesCallers serves both listeners: the public
// one's requests are anonymous, the service listener's carry their client
// certificate's identity and refuse a caller without one; fence headers
// are registry-sync's; both listeners stop when the context ends.
func TestServiceListenerIdentifiesCallers(t *testing.T) {
	ca, err := identityca.New(time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	creds := func(id identity.ID) *identity.Credentials { return authztest.Credentials(t, ca, id, time.Now()) }
	cfg := testConfig()
	cfg.ShutdownGrace = time.Second
	cfg.Identity = creds(identity.ServiceID(identity.Gateway))
	gw := New(cfg, env.store, env.admission, nil)
	gw.echo.GET("/whoami", func(c *echo.Context) error {
		if id, ok := authz.Caller(c.Request().Context()); ok {
			return c.String(http.StatusOK, id.String())
		}
		return c.String(http.StatusOK, "anonymous")
	})
	pub, _ := net.Listen("tcp", "127.0.0.1:0")
	svc, _ := net.Listen("tcp", "127.0.0.1:0")
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- gw.ServeListeners(ctx, pub, svc) }()
	svcURL := "https://" + svc.Addr().String()

	get := func(hc *http.Client, url string, header map[string]string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if _, body := get(http.DefaultClient, "http://"+pub.Addr().String()+"/whoami", nil); body != "anonymous" {
		t.Errorf("public listener: %q", body)
	}
	ci := authz.GatewayHTTPClient(creds(identity.ID{Kind: identity.Client, Name: "ci"}), svcURL)
	if _, body := get(ci, svcURL+"/whoami", nil); body != "client/ci" {
		t.Errorf("service listener, client/ci: %q", body)
	}
	rs := authz.GatewayHTTPClient(creds(identity.ServiceID(identity.RegistrySync)), svcURL)
	if _, body := get(rs, svcURL+"/whoami", nil); body != "service/registry-sync" {
		t.Errorf("service listener, registry-sync: %q", body)
	}
	fenced := map[string]string{fence.HeaderLease: "registry-sync", fence.HeaderEpoch: "1"}
	if status, body := get(ci, svcURL+"/whoami", fenced); status != http.StatusForbidden || !strings.Contains(body, `"code":"denied"`) {
		t.Errorf("client/ci with fence headers: %d %s", status, body)
	}
	if status, body := get(http.DefaultClient, "http://"+pub.Addr().String()+"/whoami", fenced); status != http.StatusForbidden {
		t.Errorf("anonymous with fence headers: %d %s", status, body)
	}
	if status, body := get(rs, svcURL+"/whoami", fenced); status != http.StatusOK {
		t.Errorf("registry-sync with fence headers: %d %s", status, body)
	}
	// No certificate: the handshake fails.
	noCert := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the test's point
	if _, err := noCert.Get(svcURL + "/whoami"); err == nil {
		t.Error("the service listener answered a caller without a certificate")
	}

	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("ServeListeners: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ServeListeners did not return")
	}
	for _, a := range []string{pub.Addr().String(), svc.Addr().String()} {
		if c, err := net.DialTimeout("tcp", a, time.Second); err == nil {
			c.Close()
			t.Errorf("%s still accepts connections", a)
		}
	}
}

// TestQueueInputIsAnonymous: with identities on, a queue-input message
// goes through the same rules as an anonymous HTTP request: a reserved
// label is refused (403 denied), an ordinary one taken.
func TestQueueInputIsAnonymous(t *testing.T) {
	createType(t, "QueueReserved", "v1", looseSchema)
	ca, err := identityca.New(time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "gateway")
	if err := ca.IssueTo(dir, identity.ServiceID(identity.Gateway), time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	if cfg.Identity, err = identity.Load(dir); err != nil {
		t.Fatal(err)
	}
	gw := New(cfg, env.store, env.admission, nil)
	a := gw.Execute(t.Context(), queueinput.Request{Op: queueinput.OpApply,
		Document: []byte("kind: Resource\ntype: QueueReserved/v1\nmetadata:\n  name: forged\n  labels: {httpsource.no8s.io/source: feed}\nspec: {name: x}\n")})
	if a.Status != http.StatusForbidden || !strings.Contains(string(a.Body), `"code":"denied"`) || !strings.Contains(string(a.Body), "httpsource.no8s.io/source") {
		t.Fatalf("reserved label by the queue input: %d %s", a.Status, a.Body)
	}
	a = gw.Execute(t.Context(), queueinput.Request{Op: queueinput.OpApply,
		Document: []byte("kind: Resource\ntype: QueueReserved/v1\nmetadata:\n  name: plain\n  labels: {team: q}\nspec: {name: x}\n")})
	if a.Status != http.StatusCreated {
		t.Fatalf("ordinary label by the queue input: %d %s", a.Status, a.Body)
	}
}

// TestServiceListenerIgnoresHostAllowList: the service listener's callers
// present a client certificate and dial it by address, so its Host is not
// checked, while the public listener refuses the same address as Host.
func TestServiceListenerIgnoresHostAllowList(t *testing.T) {
	ca, err := identityca.New(time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	creds := func(id identity.ID) *identity.Credentials { return authztest.Credentials(t, ca, id, time.Now()) }
	cfg := DefaultConfig()
	cfg.ShutdownGrace = time.Second
	cfg.Identity = creds(identity.ServiceID(identity.Gateway))
	cfg.AllowedHosts = []string{"api.example.com"}
	gw := New(cfg, env.store, env.admission, nil)
	pub, _ := net.Listen("tcp", "127.0.0.1:0")
	svc, _ := net.Listen("tcp", "127.0.0.1:0")
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- gw.ServeListeners(ctx, pub, svc) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("ServeListeners: %v", err)
		}
	}()
	get := func(hc *http.Client, url string) int {
		t.Helper()
		resp, err := hc.Get(url)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if status := get(http.DefaultClient, "http://"+pub.Addr().String()+"/api/v1/resource-types"); status != http.StatusMisdirectedRequest {
		t.Errorf("public listener by address: %d, want 421", status)
	}
	svcURL := "https://" + svc.Addr().String()
	rs := authz.GatewayHTTPClient(creds(identity.ServiceID(identity.RegistrySync)), svcURL)
	if status := get(rs, svcURL+"/api/v1/resource-types"); status != http.StatusOK {
		t.Errorf("service listener by address: %d, want 200", status)
	}
}

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/no8s/no8s/libs/platform/secret"
	"github.com/no8s/no8s/services/internal/grants"
)

// grantFile writes a credential grants file of gs (checked as the
// services check it) and returns its path.
func grantFile(t *testing.T, gs ...grants.Grant) string {
	t.Helper()
	if _, err := grants.New(gs...); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(map[string]any{"grants": gs})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "credential-grants.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// grantTestSecrets grants, in every namespace, the secrets the tests use:
// NO8S_REGISTRY_HS_TOKEN (feedToken) as a header sent to each of origins,
// NO8S_REGISTRY_BAD_PW and NOT_UNDER_THE_PREFIX as datasource credentials
// for the machine's MariaDB and PostgreSQL. It names the file in
// NO8S_CREDENTIAL_GRANTS (t.Setenv) for every process the test starts
// afterwards: without a file nothing is granted.
func grantTestSecrets(t *testing.T, origins ...string) {
	t.Helper()
	all := []string{"*"}
	gs := []grants.Grant{
		{Secret: secret.Env("NO8S_REGISTRY_BAD_PW"), Use: grants.UseDatasource, Namespaces: all, Destinations: []string{"127.0.0.1:3306", "127.0.0.1:5432"}},
		{Secret: secret.Env("NOT_UNDER_THE_PREFIX"), Use: grants.UseDatasource, Namespaces: all, Destinations: []string{"127.0.0.1:3306", "127.0.0.1:5432"}},
	}
	if len(origins) > 0 {
		gs = append(gs, grants.Grant{Secret: secret.Env("NO8S_REGISTRY_HS_TOKEN"), Use: grants.UseHTTPHeader, Namespaces: all, Destinations: origins})
	}
	t.Setenv(grants.EnvFile, grantFile(t, gs...))
}

// TestCredentialGrants is issue 26's exfiltration finding with real
// processes: a client asking an HttpSource to send the registry's database
// password, or a granted header token, to a server of its choosing is
// refused at admission; a grant that admission still has but
// registry-sync no longer has (revoked) is refused again at use, with
// Synced False SecretNotGranted; the thief server records that no request,
// and so no credential, arrived. A registry-sync started with no file then
// refuses the granted token too: nothing is granted without one.
func TestCredentialGrants(t *testing.T) {
	var stolen, requests atomic.Int32
	thief := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if r.Header.Get("Authorization") != "" {
			stolen.Add(1)
		}
		_, _ = w.Write([]byte(`{"data":{"items":[]}}`))
	}))
	t.Cleanup(thief.Close)
	feed := newFeed(t)
	feed.set("", feedItems("a1")...)
	token := map[string]any{"env": "NO8S_REGISTRY_HS_TOKEN"}
	dbPassword := map[string]any{"env": "NO8S_REGISTRY_BAD_PW"}
	tokenRef, dbPasswordRef := secret.Env("NO8S_REGISTRY_HS_TOKEN"), secret.Env("NO8S_REGISTRY_BAD_PW")
	strict := grantFile(t,
		grants.Grant{Secret: tokenRef, Use: grants.UseHTTPHeader, Namespaces: []string{"default"}, Destinations: []string{feed.srv.URL}},
		grants.Grant{Secret: dbPasswordRef, Use: grants.UseDatasource, Namespaces: []string{"team-db"}, Destinations: []string{"127.0.0.1:3306"}})
	// Admission's file still grants what registry-sync's no longer does
	// (a grant revoked since the sources were admitted).
	loose := grantFile(t,
		grants.Grant{Secret: tokenRef, Use: grants.UseHTTPHeader, Namespaces: []string{"default"}, Destinations: []string{feed.srv.URL, thief.URL}},
		grants.Grant{Secret: dbPasswordRef, Use: grants.UseDatasource, Namespaces: []string{"team-db", "default"}, Destinations: []string{"127.0.0.1:3306"}})
	t.Setenv(grants.EnvFile, loose) // every process of the cluster: admission
	c := newTenantCluster(t)
	// A noop deployment of its own for WebApps (the tenant cluster's noop
	// serves Tenant/v1): another name, another work queue and credential.
	c.startReconcilerArgs("noop-webapp", c.storeAddrs[0], nil, "noop", "--name", "webapp", "--types", "WebApp/v1")
	syncA := c.startSync("a", "--credential-grants", strict)
	c.waitSyncLeads()

	// At admission: the database password as a header, to the thief, or
	// to the feed itself (a datasource credential is never a header); the
	// token to a third origin; the password from a namespace not granted.
	for _, bad := range []struct {
		url    string
		header map[string]any
	}{
		{thief.URL + "/x", dbPassword},
		{feed.srv.URL + "/x", dbPassword},
		{"http://127.0.0.2:9/x", token},
	} {
		body := httpSourceBody("exfil", bad.url)
		body["spec"].(map[string]any)["headers"] = map[string]any{"Authorization": bad.header}
		r := do(t, "POST", c.base+"/api/v1/resources", body)
		if r.status != 400 || !strings.Contains(string(r.body), "/spec/headers/Authorization") || !strings.Contains(string(r.body), "not granted") {
			t.Fatalf("exfiltration to %s with %v: %d %s", bad.url, bad.header, r.status, r.body)
		}
		t.Logf("refused at admission: %.300s", r.body)
	}
	ds := newMariaDB(t)
	src := ds.source()
	src["passwordRef"] = dbPassword
	if r := do(t, "POST", c.base+"/api/v1/namespaces", map[string]any{"name": "team-x"}); r.status != 201 {
		t.Fatalf("namespace: %d %s", r.status, r.body)
	}
	body := registryBody("stolen", src)
	body["namespace"] = "team-x"
	if r := do(t, "POST", c.base+"/api/v1/resources", body); r.status != 400 || !strings.Contains(string(r.body), "/spec/source/passwordRef") {
		t.Fatalf("a registry of team-x using team-db's password: %d %s", r.status, r.body)
	}

	// The granted token to the granted feed works.
	good := c.create(httpSourceBody("inventory", feed.srv.URL+"/inventory"))
	waitSourceSynced(t, c.base, good["id"].(float64), "True", "Synced", nil)

	// At use: admitted under the loose file, refused by registry-sync.
	revoked := c.create(httpSourceBody("revoked", thief.URL+"/inventory"))
	waitSourceSynced(t, c.base, revoked["id"].(float64), "False", "SecretNotGranted", nil)
	reg := c.create(registryBody("revoked-db", src))
	c.waitSynced(reg["id"].(float64), "False", "SecretNotGranted", nil)
	_, syn := sourceStatus(t, c.base, revoked["id"].(float64))
	t.Logf("at use: %v", syn["message"])
	time.Sleep(2 * time.Second) // more polls
	if stolen.Load() != 0 || requests.Load() != 0 {
		t.Fatalf("the thief got %d requests, %d with a credential", requests.Load(), stolen.Load())
	}
	t.Logf("the thief server recorded %d requests, %d credentials", requests.Load(), stolen.Load())

	// No file at use: a registry-sync started without one refuses the
	// granted token too, and says at start that nothing is granted.
	syncA.stop(syscall.SIGTERM, 10*time.Second)
	syncB := c.startSync("b", "--credential-grants=")
	waitSourceSynced(t, c.base, good["id"].(float64), "False", "SecretNotGranted", nil)
	_, syn = sourceStatus(t, c.base, good["id"].(float64))
	if msg := fmt.Sprint(syn["message"]); !strings.Contains(msg, "no credential grants file") || !strings.Contains(msg, grants.DocsRef) {
		t.Fatalf("no file at use: %s", msg)
	}
	if b, err := os.ReadFile(syncB.log.Name()); err != nil || !strings.Contains(string(b), "every secret reference of a TenantRegistry or HttpSource is refused") {
		t.Fatalf("registry-sync without a file does not say so: %v", err)
	}
}

// TestCredentialGrantsClosedByDefault: a newcomer's no8s dev, no
// --credential-grants and no NO8S_CREDENTIAL_GRANTS, creates an empty
// grants file in its data directory and says where; an HttpSource's header
// and a TenantRegistry's password are refused at admission, each at its
// field, with the grant to list, the flag, the variable and the design
// page.
func TestCredentialGrantsClosedByDefault(t *testing.T) {
	env := slices.DeleteFunc(noPostgreSQL(), func(kv string) bool { return strings.HasPrefix(kv, grants.EnvFile+"=") })
	addrs, dev := startDevServing(t, env, "WebApp", map[string]any{
		"type": "object", "properties": map[string]any{"image": map[string]any{"type": "string"}, "host": map[string]any{"type": "string"}}})
	file := filepath.Join(addrs.DataDir, grants.DevFile)
	b, err := os.ReadFile(file)
	if err != nil || !strings.HasPrefix(string(b), "# Credential grants") {
		t.Fatalf("the data directory's grants file: %v %.100s", err, b)
	}
	if logs, err := os.ReadFile(dev.log.Name()); err != nil || !strings.Contains(string(logs), file) {
		t.Fatalf("no8s dev does not say where its grants file is: %v", err)
	}
	feed := newFeed(t)
	for path, body := range map[string]map[string]any{
		"/spec/headers/Authorization": httpSourceBody("inventory", feed.srv.URL),
		"/spec/source/passwordRef": registryBody("customers", map[string]any{"type": "mysql", "host": "127.0.0.1", "database": "crm", "table": "tenants",
			"username": "reader", "passwordRef": map[string]any{"env": "NO8S_REGISTRY_CRM_PASSWORD"}}),
	} {
		r := do(t, "POST", addrs.APIURL+"/api/v1/resources", body)
		if r.status != 400 || !strings.Contains(string(r.body), `"`+path+`"`) {
			t.Fatalf("%s: %d %s", path, r.status, r.body)
		}
		for _, want := range []string{"not granted", "no grant lets namespace", "--credential-grants", grants.EnvFile, grants.DevFile + " in its data directory", grants.DocsRef, `\"use\":`} {
			if !strings.Contains(string(r.body), want) {
				t.Errorf("%s: the refusal lacks %q: %s", path, want, r.body)
			}
		}
		t.Logf("refused at admission: %.400s", r.body)
	}
	if feed.requests.Load() != 0 {
		t.Fatalf("the feed got %d requests", feed.requests.Load())
	}
}

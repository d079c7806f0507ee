package e2e

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// writeGrants writes a credential grants file.
func writeGrants(t *testing.T, name string, grants ...map[string]any) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"grants": grants})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCredentialGrants is issue 26's exfiltration finding with real
// processes: a client asking an HttpSource to send the registry's database
// password, or a granted header token, to a server of its choosing is
// refused at admission; a grant that admission still has but
// registry-sync no longer has (revoked) is refused again at use, with
// Synced False SecretNotGranted; the thief server records that no request,
// and so no credential, arrived.
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
	strict := writeGrants(t, "strict.json",
		map[string]any{"secret": token, "use": "httpHeader", "namespaces": []string{"default"}, "destinations": []string{feed.srv.URL}},
		map[string]any{"secret": dbPassword, "use": "datasource", "namespaces": []string{"team-db"}, "destinations": []string{"127.0.0.1:3306"}})
	// Admission's file still grants what registry-sync's no longer does
	// (a grant revoked since the sources were admitted).
	loose := writeGrants(t, "loose.json",
		map[string]any{"secret": token, "use": "httpHeader", "namespaces": []string{"default"}, "destinations": []string{feed.srv.URL, thief.URL}},
		map[string]any{"secret": dbPassword, "use": "datasource", "namespaces": []string{"team-db", "default"}, "destinations": []string{"127.0.0.1:3306"}})
	t.Setenv("NO8S_CREDENTIAL_GRANTS", loose) // every process of the cluster: admission
	c := newTenantCluster(t)
	c.startReconcilerArgs("noop-webapp", c.storeAddrs[0], nil, "noop", "--types", "WebApp/v1")
	c.startSync("a", "--credential-grants", strict)
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
}

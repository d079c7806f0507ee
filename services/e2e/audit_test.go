package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/no8s/no8s/libs/api/subjects"
	"github.com/no8s/no8s/services/internal/audit"
	"github.com/no8s/no8s/services/internal/authn"
)

// auditCall sends method url with a request id and a bearer token ("":
// the administrator's, added by the transport) and returns the answer.
func auditCall(t *testing.T, method, url, token, rid string, body any) response {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("X-Request-Id", rid)
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// auditExpectation is one write or denial the test made, and how to find
// its record.
type auditExpectation struct {
	what    string
	match   func(audit.Record) bool
	outcome audit.Outcome
	user    string
}

// byRequestID matches the record of request id rid.
func byRequestID(rid string) func(audit.Record) bool {
	return func(r audit.Record) bool { return r.RequestID == rid }
}

// byRoute matches the records of method on route about an object named
// name (the CLI's requests, whose request ids the test does not choose).
func byRoute(method, route, name string) func(audit.Record) bool {
	return func(r audit.Record) bool { return r.Method == method && r.Route == route && r.Object.Name == name }
}

// decodeAuditRecords decodes JSON lines or messages into records.
func decodeAuditRecords(t *testing.T, what string, data [][]byte) []audit.Record {
	t.Helper()
	out := make([]audit.Record, 0, len(data))
	for _, b := range data {
		var r audit.Record
		if err := json.Unmarshal(b, &r); err != nil || r.Log != audit.LogTag {
			t.Fatalf("%s: not an audit record: %s (%v)", what, b, err)
		}
		out = append(out, r)
	}
	return out
}

// TestAuditLogRecordsEachWriteAndDenialOnce drives writes (a type,
// resources created, updated and deleted over REST and the CLI, tokens
// created and revoked, a webhook registered and removed, a queue-input
// apply) and denials (a bad token on a write, on a CLI read and on the
// queue input, a service account listing every token and revoking another's)
// through `no8s dev`, then reads its audit log file (complete once no8s dev
// stopped) and its audit stream: each write and denial is there exactly
// once with its identity and outcome, and no secret the test used is
// anywhere in either.
func TestAuditLogRecordsEachWriteAndDenialOnce(t *testing.T) {
	env := noPostgreSQL()
	schema := map[string]any{"type": "object", "properties": map[string]any{"size": map[string]any{"type": "integer"}}}
	addrs, dev := startDevServing(t, env, "Audited", schema)
	base := addrs.APIURL
	logPath := filepath.Join(addrs.DataDir, "audit.log")
	cli := cliEnv(t, base)
	admin := authn.BootstrapUsername
	var want []auditExpectation
	expect := func(what string, match func(audit.Record) bool, outcome audit.Outcome, user string) {
		want = append(want, auditExpectation{what: what, match: match, outcome: outcome, user: user})
	}
	call := func(rid, method, path, token string, body any, status int) response {
		t.Helper()
		r := auditCall(t, method, base+path, token, rid, body)
		if r.status != status {
			t.Fatalf("%s %s: %d %s, want %d", method, path, r.status, r.body, status)
		}
		return r
	}
	expect("the type, created by startDevServing", byRoute("POST", "/api/v1/resource-types", "Audited"), audit.Succeeded, admin)

	// Resources over REST: create, update, delete.
	r := call("e2e-audit-create", "POST", "/api/v1/resources", "", map[string]any{"name": "r1", "resource_type_name": "Audited", "resource_type_version": "v1", "spec": map[string]any{"size": 1}}, 201)
	id := fmt.Sprint(int64(r.json(t)["id"].(float64)))
	expect("REST create", byRequestID("e2e-audit-create"), audit.Succeeded, admin)
	call("e2e-audit-update", "PUT", "/api/v1/resources/"+id, "", map[string]any{"spec": map[string]any{"size": 2}}, 200)
	expect("REST update", byRequestID("e2e-audit-update"), audit.Succeeded, admin)
	call("e2e-audit-delete", "DELETE", "/api/v1/resources/"+id, "", nil, 202)
	expect("REST delete", byRequestID("e2e-audit-delete"), audit.Succeeded, admin)

	// Resources with the CLI: apply, delete.
	doc := filepath.Join(t.TempDir(), "r2.yaml")
	if err := os.WriteFile(doc, []byte("kind: Resource\ntype: Audited/v1\nmetadata:\n  name: r2\nspec:\n  size: 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if res := no8sEnv(t, cli, "", "apply", "-f", doc); res.code != 0 {
		t.Fatalf("no8s apply: %+v", res)
	}
	expect("CLI apply", byRoute("POST", "/api/v1/resources/apply", "r2"), audit.Succeeded, admin)
	if res := no8sEnv(t, cli, "", "delete", "Audited/v1", "r2"); res.code != 0 {
		t.Fatalf("no8s delete: %+v", res)
	}
	expect("CLI delete", func(r audit.Record) bool {
		return r.Method == "DELETE" && r.Route == "/api/v1/resources/:id" && r.Object.Name == "r2"
	}, audit.Succeeded, admin)

	// Tokens: a service account's over REST, another with the CLI.
	r = call("e2e-audit-token", "POST", "/api/v1/tokens", "", map[string]any{"name": "audit-sa", "service_account": true, "expires_in": "1h"}, 201)
	saToken, _ := r.json(t)["token"].(string)
	if saToken == "" {
		t.Fatalf("token create: %s", r.body)
	}
	expect("REST token create", byRequestID("e2e-audit-token"), audit.Succeeded, admin)
	created := no8sEnv(t, cli, "", "token", "create", "audit-ci", "--service-account", "--expires-in", "1h")
	ciToken := strings.TrimSpace(created.stdout)
	if created.code != 0 || !strings.HasPrefix(ciToken, "no8s_") {
		t.Fatalf("no8s token create: %+v", created)
	}
	expect("CLI token create", byRoute("POST", "/api/v1/tokens", "audit-ci"), audit.Succeeded, admin)
	ciID, _, err := authn.ParseToken(ciToken)
	if err != nil {
		t.Fatal(err)
	}

	// Denials: a bad token on a write and on a CLI read; a service account
	// listing every token (403) and revoking one it may not see (404).
	_, _, badToken, err := authn.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	call("e2e-audit-401", "POST", "/api/v1/resources", badToken, map[string]any{"name": "r3"}, 401)
	expect("401 write", byRequestID("e2e-audit-401"), audit.Denied, "")
	badCLI := []string{"NO8S_SERVER=" + base, "NO8S_CONFIG=" + filepath.Join(t.TempDir(), "none.yaml"), "NO8S_TOKEN=" + badToken}
	if res := no8sEnv(t, badCLI, "", "get", "types"); res.code == 0 {
		t.Fatalf("no8s get types with a bad token: %+v", res)
	}
	expect("401 CLI read", func(r audit.Record) bool {
		return r.Method == "GET" && r.Route == "/api/v1/resource-types" && r.Status == 401
	}, audit.Denied, "")
	call("e2e-audit-403", "GET", "/api/v1/tokens?all=true", saToken, nil, 403)
	expect("403", byRequestID("e2e-audit-403"), audit.Denied, "serviceaccount:audit-sa")
	call("e2e-audit-hidden", "DELETE", "/api/v1/tokens/"+ciID, saToken, nil, 404)
	expect("revoke refused (404)", byRequestID("e2e-audit-hidden"), audit.Denied, "serviceaccount:audit-sa")
	if res := no8sEnv(t, cli, "", "token", "revoke", ciID); res.code != 0 {
		t.Fatalf("no8s token revoke: %+v", res)
	}
	expect("CLI token revoke", func(r audit.Record) bool {
		return r.Route == "/api/v1/tokens/:id" && r.Object.ID == ciID && r.Outcome == audit.Succeeded
	},
		audit.Succeeded, admin)

	// A webhook whose URL carries a secret, registered and removed.
	const hookSecret = "hook-secret-7f3a9c"
	r = call("e2e-audit-hook", "POST", "/api/v1/admission-webhooks", "", map[string]any{"name": "audit-hook.example.com", "resource_type_name": "Nothing",
		"webhook_url": "http://127.0.0.1:9/hook?key=" + hookSecret, "webhook_type": "validating", "operations": []string{"CREATE"}, "failure_policy": "Ignore"}, 201)
	hookID := fmt.Sprint(int64(r.json(t)["id"].(float64)))
	expect("webhook create", byRequestID("e2e-audit-hook"), audit.Succeeded, admin)
	call("e2e-audit-unhook", "DELETE", "/api/v1/admission-webhooks/"+hookID, "", nil, 204)
	expect("webhook delete", byRequestID("e2e-audit-unhook"), audit.Succeeded, admin)

	// The queue input, as the developer's NATS publisher: an apply with
	// the administrator's token, one with a bad token.
	pub, err := nats.Connect(addrs.NATSURL, nats.UserCredentials(addrs.NATSPublisherCreds))
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	for _, m := range []struct{ rid, token, name string }{{"e2e-audit-input", adminToken, "r4"}, {"e2e-audit-input-401", badToken, "r5"}} {
		msg := nats.NewMsg(subjects.InputRequestApply)
		msg.Header.Set("Authorization", "Bearer "+m.token)
		msg.Header.Set("X-Request-Id", m.rid)
		msg.Data = []byte("kind: Resource\ntype: Audited/v1\nmetadata:\n  name: " + m.name + "\nspec:\n  size: 4\n")
		if _, err := pub.RequestMsg(msg, 20*time.Second); err != nil {
			t.Fatalf("input %s: %v", m.rid, err)
		}
	}
	expect("queue input apply", byRequestID("e2e-audit-input"), audit.Succeeded, admin)
	expect("queue input 401", byRequestID("e2e-audit-input-401"), audit.Denied, "")

	// The stream, as a NATS admin, once every record is in: then no8s dev
	// stops, which writes the rest of the log.
	nc, err := nats.Connect(addrs.NATSURL, natsAdminOptions(t, addrs.CADir)...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var streamData [][]byte
	waitFor(t, 20*time.Second, "every record in the audit stream", func() error {
		streamData = readAuditStream(t.Context(), js)
		recs := decodeAuditRecords(t, "stream", streamData)
		for _, w := range want {
			if n := countMatches(recs, w.match); n < 1 {
				return fmt.Errorf("%s: not in the stream yet", w.what)
			}
		}
		return nil
	})
	dev.stop(syscall.SIGTERM, 30*time.Second)
	logData, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatalf("the audit log: %v", err)
	}
	var logLines [][]byte
	sc := bufio.NewScanner(bytes.NewReader(logData))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		logLines = append(logLines, append([]byte(nil), sc.Bytes()...))
	}
	for what, recs := range map[string][]audit.Record{"log": decodeAuditRecords(t, "log", logLines), "stream": decodeAuditRecords(t, "stream", streamData)} {
		for _, w := range want {
			var got []audit.Record
			for _, r := range recs {
				if w.match(r) {
					got = append(got, r)
				}
			}
			if len(got) != 1 {
				t.Errorf("%s: %s: %d records, want 1: %+v", what, w.what, len(got), got)
				continue
			}
			r := got[0]
			if r.Outcome != w.outcome || r.User.Username != w.user || r.RequestID == "" || (w.outcome == audit.Denied) != (r.Reason != "") {
				t.Errorf("%s: %s: %+v, want outcome %s by %q", what, w.what, r, w.outcome, w.user)
			}
		}
		for _, r := range recs {
			if r.Method == "GET" && r.Outcome != audit.Denied {
				t.Errorf("%s: a read that was not refused is recorded: %+v", what, r)
			}
		}
	}
	all := append(logData, bytes.Join(streamData, nil)...)
	for name, secret := range map[string]string{"the administrator's token": adminToken, "the service account's token": saToken,
		"the CLI's token": ciToken, "the bad token": badToken, "the webhook's secret": hookSecret} {
		if bytes.Contains(all, []byte(secret)) {
			t.Errorf("%s is in the audit records", name)
		}
	}
}

// countMatches counts the records match matches.
func countMatches(recs []audit.Record, match func(audit.Record) bool) int {
	n := 0
	for _, r := range recs {
		if match(r) {
			n++
		}
	}
	return n
}

// readAuditStream reads every message of the audit stream (none when it is
// not there yet).
func readAuditStream(ctx context.Context, js jetstream.JetStream) [][]byte {
	st, err := js.Stream(ctx, subjects.AuditStream)
	if err != nil {
		return nil
	}
	info, err := st.Info(ctx)
	if err != nil || info.State.Msgs == 0 {
		return nil
	}
	var out [][]byte
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			continue
		}
		out = append(out, m.Data)
	}
	return out
}

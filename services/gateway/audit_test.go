package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/no8s/no8s/libs/api/subjects"
	"github.com/no8s/no8s/libs/client"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/gateway/queueinput"
	"github.com/no8s/no8s/services/internal/audit"
	"github.com/no8s/no8s/services/internal/authn"
)

// auditLog is a gateway's audit log, read by the test.
type auditLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *auditLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *auditLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// auditGateway serves the package's stack with authentication on and the
// audit log and stream on. flush stops its recorder once the requests are
// made, draining the queue.
func auditGateway(t *testing.T) (gw *Service, srv *httptest.Server, log *auditLog, flush func()) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Auth = AuthConfig{BootstrapToken: bootstrapToken}
	cfg.Tokens = storev1.NewTokenServiceClient(env.storeConn)
	cfg.JetStream = env.js
	log = &auditLog{}
	cfg.Audit = AuditConfig{Log: log, Stream: true}
	gw = New(cfg, env.store, env.admission, env.log.With("service", "gateway-audit"))
	ctx, cancel := context.WithCancel(env.ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = gw.RunAudit(ctx) }()
	srv = httptest.NewServer(gw.Handler())
	var once sync.Once
	flush = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(func() { srv.Close(); flush() })
	return gw, srv, log, flush
}

// auditCall sends method path with a request id and a bearer token ("":
// none) and returns the status and body.
func auditCall(t *testing.T, srv *httptest.Server, method, path, token, rid string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set(HeaderRequestID, rid)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if got := resp.Header.Get(HeaderRequestID); got != rid {
		t.Fatalf("%s %s: request id %q, want %q", method, path, got, rid)
	}
	return resp.StatusCode, b
}

// auditRecords decodes log lines, by request id.
func auditRecords(t *testing.T, data [][]byte) map[string][]audit.Record {
	t.Helper()
	out := map[string][]audit.Record{}
	for _, b := range data {
		var r audit.Record
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("audit record %s: %v", b, err)
		}
		out[r.RequestID] = append(out[r.RequestID], r)
	}
	return out
}

// auditLogLines splits a log into its lines.
func auditLogLines(log string) [][]byte {
	var out [][]byte
	sc := bufio.NewScanner(strings.NewReader(log))
	for sc.Scan() {
		out = append(out, append([]byte(nil), sc.Bytes()...))
	}
	return out
}

// streamRecords reads every message of the audit stream, checking each
// one's subject against its outcome.
func streamRecords(t *testing.T) [][]byte {
	t.Helper()
	st, err := env.js.Stream(t.Context(), subjects.AuditStream)
	if err != nil {
		t.Fatalf("the audit stream: %v", err)
	}
	info, err := st.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := st.GetMsg(t.Context(), seq)
		if err != nil {
			t.Fatalf("audit stream message %d: %v", seq, err)
		}
		var r audit.Record
		if err := json.Unmarshal(m.Data, &r); err != nil || m.Subject != subjects.Audit(string(r.Outcome)) {
			t.Fatalf("audit stream message %d on %s: %s (%v)", seq, m.Subject, m.Data, err)
		}
		out = append(out, m.Data)
	}
	return out
}

// wantRecord is what one request's record must say.
type wantRecord struct {
	rid, username, method, verb, route string
	status                             int
	outcome                            audit.Outcome
	object                             audit.Object
	reason                             string
}

func TestAuditRecordsEachWriteAndDenialOnce(t *testing.T) {
	gw, srv, log, flush := auditGateway(t)
	admin := bootstrapToken
	var wants []wantRecord
	call := func(w wantRecord, token, path string, body any) []byte {
		t.Helper()
		status, b := auditCall(t, srv, w.method, path, token, w.rid, body)
		if status != w.status {
			t.Fatalf("%s %s: %d %s, want %d", w.method, path, status, b, w.status)
		}
		wants = append(wants, w)
		return b
	}
	bootstrap := authn.BootstrapUsername

	// Writes.
	b := call(wantRecord{rid: "audit-type", username: bootstrap, method: "POST", verb: "create", route: "/api/v1/resource-types", status: 201,
		outcome: audit.Succeeded, object: audit.Object{Kind: "ResourceType", Name: "AuditWidget", Version: "v1"}},
		admin, "/api/v1/resource-types", map[string]any{"name": "AuditWidget", "version": "v1", "schema": json.RawMessage(`{"type":"object","properties":{"size":{"type":"integer"}}}`)})
	var typ struct{ ID int64 }
	_ = json.Unmarshal(b, &typ)
	wants[len(wants)-1].object.ID = fmt.Sprint(typ.ID)
	serveType(t, "AuditWidget", "v1")
	b = call(wantRecord{rid: "audit-create", username: bootstrap, method: "POST", verb: "create", route: "/api/v1/resources", status: 201,
		outcome: audit.Succeeded, object: audit.Object{Kind: "Resource", Type: "AuditWidget", Version: "v1", Namespace: "default", Name: "w1"}},
		admin, "/api/v1/resources", map[string]any{"name": "w1", "resource_type_name": "AuditWidget", "resource_type_version": "v1", "spec": map[string]any{"size": 1}})
	var res client.Resource
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprint(res.ID)
	wants[len(wants)-1].object.ID = id
	full := audit.Object{Kind: "Resource", Type: "AuditWidget", Version: "v1", Namespace: "default", Name: "w1", ID: id}
	call(wantRecord{rid: "audit-update", username: bootstrap, method: "PUT", verb: "update", route: "/api/v1/resources/:id", status: 200,
		outcome: audit.Succeeded, object: full}, admin, "/api/v1/resources/"+id, map[string]any{"spec": map[string]any{"size": 2}})
	call(wantRecord{rid: "audit-update-invalid", username: bootstrap, method: "PUT", verb: "update", route: "/api/v1/resources/:id", status: 400,
		outcome: audit.Failed, object: audit.Object{Kind: "Resource", ID: id}}, admin, "/api/v1/resources/"+id, map[string]any{"spec": map[string]any{"size": "big"}})
	call(wantRecord{rid: "audit-delete", username: bootstrap, method: "DELETE", verb: "delete", route: "/api/v1/resources/:id", status: 202,
		outcome: audit.Succeeded, object: full}, admin, "/api/v1/resources/"+id, nil)

	// Tokens: a service account's, which is no administrator.
	b = call(wantRecord{rid: "audit-token-create", username: bootstrap, method: "POST", verb: "create", route: "/api/v1/tokens", status: 201,
		outcome: audit.Succeeded, object: audit.Object{Kind: "Token", Name: "audit-sa"}}, admin, "/api/v1/tokens", client.TokenCreate{Name: "audit-sa", ServiceAccount: true, ExpiresIn: "1h"})
	var sa client.Token
	if err := json.Unmarshal(b, &sa); err != nil || sa.Value == "" {
		t.Fatalf("token %s: %v", b, err)
	}
	wants[len(wants)-1].object.ID = sa.ID
	b = call(wantRecord{rid: "audit-token-create-2", username: bootstrap, method: "POST", verb: "create", route: "/api/v1/tokens", status: 201,
		outcome: audit.Succeeded, object: audit.Object{Kind: "Token", Name: "audit-other"}}, admin, "/api/v1/tokens", client.TokenCreate{Name: "audit-other", ExpiresIn: "1h"})
	var other client.Token
	if err := json.Unmarshal(b, &other); err != nil || other.Value == "" {
		t.Fatalf("token %s: %v", b, err)
	}
	wants[len(wants)-1].object.ID = other.ID

	// Denials: a bad credential (a write and a read, the read's token in
	// its query), a service account listing every token (403) and
	// revoking another's (404, denied by the handler).
	badID, _, badToken, err := authn.NewToken() // well-formed, never stored
	if err != nil {
		t.Fatal(err)
	}
	call(wantRecord{rid: "audit-401-write", method: "POST", verb: "create", route: "/api/v1/resources", status: 401, outcome: audit.Denied,
		object: audit.Object{Kind: "Resource"}, reason: "invalid credentials: unknown API token"}, badToken, "/api/v1/resources", map[string]any{"name": "w2"})
	call(wantRecord{rid: "audit-401-watch", method: "GET", verb: "watch", route: "/api/v1/events", status: 401, outcome: audit.Denied,
		reason: "invalid credentials: unknown API token"}, "", "/api/v1/events?access_token="+badToken, nil)
	call(wantRecord{rid: "audit-403", username: sa.Owner, method: "GET", verb: "list", route: "/api/v1/tokens", status: 403, outcome: audit.Denied,
		object: audit.Object{Kind: "Token"}, reason: "no role grants manage-tokens tokens (everywhere)"}, sa.Value, "/api/v1/tokens?all=true", nil)
	call(wantRecord{rid: "audit-revoke-denied", username: sa.Owner, method: "DELETE", verb: "revoke", route: "/api/v1/tokens/:id", status: 404, outcome: audit.Denied,
		object: audit.Object{Kind: "Token", ID: other.ID}, reason: "not the token's owner, its creator or an administrator"}, sa.Value, "/api/v1/tokens/"+other.ID, nil)
	call(wantRecord{rid: "audit-revoke", username: bootstrap, method: "DELETE", verb: "revoke", route: "/api/v1/tokens/:id", status: 200, outcome: audit.Succeeded,
		object: audit.Object{Kind: "Token", ID: other.ID, Name: "audit-other"}}, admin, "/api/v1/tokens/"+other.ID, nil)

	// The roles: a service account without any may neither create a
	// resource (403) nor read one by id (404, as if it did not exist).
	b = call(wantRecord{rid: "audit-create-2", username: bootstrap, method: "POST", verb: "create", route: "/api/v1/resources", status: 201,
		outcome: audit.Succeeded, object: audit.Object{Kind: "Resource", Type: "AuditWidget", Version: "v1", Namespace: "default", Name: "w2"}},
		admin, "/api/v1/resources", map[string]any{"name": "w2", "resource_type_name": "AuditWidget", "resource_type_version": "v1", "spec": map[string]any{"size": 1}})
	var w2 client.Resource
	if err := json.Unmarshal(b, &w2); err != nil {
		t.Fatal(err)
	}
	wants[len(wants)-1].object.ID = fmt.Sprint(w2.ID)
	call(wantRecord{rid: "audit-role-403", username: sa.Owner, method: "POST", verb: "create", route: "/api/v1/resources", status: 403, outcome: audit.Denied,
		object: audit.Object{Kind: "Resource"}, reason: "no role grants create AuditWidget/w9 in default"}, sa.Value, "/api/v1/resources",
		map[string]any{"name": "w9", "resource_type_name": "AuditWidget", "resource_type_version": "v1", "spec": map[string]any{"size": 1}})
	call(wantRecord{rid: "audit-role-hidden", username: sa.Owner, method: "GET", verb: "get", route: "/api/v1/resources/:id", status: 404, outcome: audit.Denied,
		object: audit.Object{Kind: "Resource", Type: "AuditWidget", Version: "v1", Namespace: "default", Name: "w2", ID: fmt.Sprint(w2.ID)},
		reason: "no role grants get AuditWidget/w2 in default"}, sa.Value, fmt.Sprintf("/api/v1/resources/%d", w2.ID), nil)

	// Reads are not recorded; nor a request that is neither write nor denial.
	if status, _ := auditCall(t, srv, "GET", "/api/v1/resources/"+id, admin, "audit-read", nil); status != 200 {
		t.Fatalf("read: %d", status)
	}

	// The queue input: an apply as the administrator, one with a bad token.
	a := gw.Execute(env.ctx, queueinput.Request{Op: queueinput.OpApply, RequestID: "audit-input", Authorization: "Bearer " + admin,
		Document: []byte("kind: Resource\ntype: AuditWidget/v1\nmetadata: {name: w3}\nspec: {size: 3}\n")})
	if a.Status != http.StatusCreated {
		t.Fatalf("input apply: %d %s", a.Status, a.Body)
	}
	var w3 client.Resource
	_ = json.Unmarshal(a.Body, &w3)
	if a := gw.Execute(env.ctx, queueinput.Request{Op: queueinput.OpDelete, RequestID: "audit-input-401", Authorization: "Bearer " + badToken,
		Document: []byte("kind: Resource\ntype: AuditWidget/v1\nmetadata: {name: w3}\n")}); a.Status != http.StatusUnauthorized {
		t.Fatalf("input with a bad token: %d %s", a.Status, a.Body)
	}

	flush()
	logged := auditLogLines(log.String())
	byLog := auditRecords(t, logged)
	var mine [][]byte
	for _, m := range streamRecords(t) {
		if strings.Contains(string(m), `"request_id":"audit-`) {
			mine = append(mine, m)
		}
	}
	byStream := auditRecords(t, mine)
	for name, recs := range map[string]map[string][]audit.Record{"log": byLog, "stream": byStream} {
		if len(recs) != len(wants)+2 {
			t.Errorf("%s: records of %d requests, want %d", name, len(recs), len(wants)+2)
		}
		for _, w := range wants {
			got := recs[w.rid]
			if len(got) != 1 {
				t.Errorf("%s: %d records of %s, want 1: %+v", name, len(got), w.rid, got)
				continue
			}
			r := got[0]
			if r.Log != "audit" || r.Source != audit.SourceHTTP || r.SourceAddress != "127.0.0.1" || r.User.Username != w.username || r.Method != w.method ||
				r.Verb != w.verb || r.Route != w.route || r.Status != w.status || r.Outcome != w.outcome || r.Object != w.object || r.Reason != w.reason {
				t.Errorf("%s: %s: %+v\nwant %+v", name, w.rid, r, w)
			}
			if w.username == bootstrap && (r.User.AuthMethod != authn.MethodBootstrap || len(r.User.Groups) == 0) {
				t.Errorf("%s: %s: identity %+v", name, w.rid, r.User)
			}
			if w.username == sa.Owner && (r.User.AuthMethod != authn.MethodToken || r.User.TokenID != sa.ID) {
				t.Errorf("%s: %s: identity %+v", name, w.rid, r.User)
			}
			if w.rid == "audit-401-write" && r.User.TokenID != badID {
				t.Errorf("%s: %s: the refused token's id: %+v", name, w.rid, r.User)
			}
		}
		if got := recs["audit-input"]; len(got) != 1 || got[0].Source != audit.SourceNATS || got[0].User.Username != bootstrap || got[0].Verb != "apply" ||
			got[0].Outcome != audit.Succeeded || got[0].Object != (audit.Object{Kind: "Resource", Type: "AuditWidget", Version: "v1", Namespace: "default", Name: "w3", ID: fmt.Sprint(w3.ID)}) {
			t.Errorf("%s: input apply: %+v", name, got)
		}
		if got := recs["audit-input-401"]; len(got) != 1 || got[0].Source != audit.SourceNATS || got[0].User.Username != "" || got[0].User.TokenID != badID ||
			got[0].Verb != "delete" || got[0].Outcome != audit.Denied || got[0].Status != 401 || got[0].Reason == "" {
			t.Errorf("%s: input with a bad token: %+v", name, got)
		}
		if len(recs["audit-read"]) != 0 {
			t.Errorf("%s: a read was recorded", name)
		}
	}
	all := log.String() + string(bytes.Join(mine, nil))
	for _, secret := range []string{admin, sa.Value, other.Value, badToken, "access_token"} {
		if strings.Contains(all, secret) {
			t.Errorf("the audit records hold %q", secret)
		}
	}
}

// A bootstrap token of the API tokens' shape (no8s dev's) is a secret as a
// whole: no part of it is recorded, not even refused with a typo.
func TestAuditKeepsNoPartOfTheBootstrapToken(t *testing.T) {
	bid, _, boot, err := authn.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	other, _, _, err := authn.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	s := &Service{cfg: Config{Auth: AuthConfig{BootstrapToken: boot}}}
	if got := s.presentedTokenID(bid); got != "" {
		t.Errorf("the bootstrap token's id part is recorded: %q", got)
	}
	if got := s.presentedTokenID(other); got != other {
		t.Errorf("another token's id: %q, want %q", got, other)
	}
	if got := audit.IdentityOf(&authn.Principal{Username: "admin", Method: authn.MethodBootstrap}, audit.Identity{TokenID: bid}); got.TokenID != "" {
		t.Errorf("the bootstrap principal carries the presented id: %+v", got)
	}
}

package grants

import (
	"errors"
	"strings"
	"testing"

	"github.com/no8s/no8s/libs/platform/secret"
	"github.com/no8s/no8s/services/internal/authn"
)

func TestAllow(t *testing.T) {
	s, err := Parse([]byte(`{"grants": [
		{"secret": {"env": "NO8S_REGISTRY_PW"}, "use": "datasource", "namespaces": ["team-a"], "destinations": ["DB.internal:5432"]},
		{"secret": {"env": "NO8S_REGISTRY_TOKEN"}, "use": "httpHeader", "namespaces": ["*"], "destinations": ["HTTPS://cmdb.internal:443/ignored"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	pw, tok := secret.Env("NO8S_REGISTRY_PW"), secret.Env("NO8S_REGISTRY_TOKEN")
	origin := func(u string) string {
		o, err := Origin(u)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	for _, c := range []struct {
		use, ns string
		ref     secret.Ref
		dest    string
		ok      bool
	}{
		{UseDatasource, "team-a", pw, Datasource("db.internal", 5432), true},
		{UseDatasource, "team-b", pw, Datasource("db.internal", 5432), false},
		{UseDatasource, "team-a", pw, Datasource("evil.example", 5432), false},
		{UseHTTPHeader, "team-a", pw, origin("https://db.internal:5432"), false}, // a password is not a header
		{UseHTTPHeader, "any", tok, origin("https://cmdb.internal/api/x"), true},
		{UseHTTPHeader, "any", tok, origin("http://cmdb.internal"), false},
		{UseHTTPHeader, "any", tok, origin("https://cmdb.internal.evil.example"), false},
		{UseDatasource, "any", tok, Datasource("cmdb.internal", 443), false},
	} {
		err := s.Allow(c.use, c.ns, c.ref, c.dest)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrNotGranted)) {
			t.Errorf("%+v: %v", c, err)
		}
	}
	// No file grants nothing, and the refusal says how to grant it.
	var none *Set
	err = none.Allow(UseHTTPHeader, "team-a", tok, "https://cmdb.internal")
	if !errors.Is(err, ErrNotGranted) {
		t.Fatalf("no file: %v", err)
	}
	for _, want := range []string{"no credential grants file", "--credential-grants", EnvFile, DocsRef,
		`{"secret":{"env":"NO8S_REGISTRY_TOKEN"},"use":"httpHeader","namespaces":["team-a"],"destinations":["https://cmdb.internal"]}`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("no file: %q lacks %q", err, want)
		}
	}
	// The grant that the refusal lists, in a file, grants it.
	g, err := Parse([]byte(`{"grants":[` + err.Error()[strings.Index(err.Error(), `{"secret"`):strings.Index(err.Error(), `]}`)+2] + `]}`))
	if err != nil || g.Allow(UseHTTPHeader, "team-a", tok, "https://cmdb.internal") != nil {
		t.Errorf("the listed grant: %v", err)
	}
	if err := s.Allow(UseDatasource, "team-b", pw, Datasource("db.internal", 5432)); err == nil || !strings.Contains(err.Error(), DocsRef) {
		t.Errorf("a file's refusal: %v", err)
	}
	for _, bad := range []string{`{"grants":[{"secret":{"env":"A"},"use":"x","namespaces":["a"],"destinations":["h:1"]}]}`,
		`{"grants":[{"secret":{"env":"A"},"use":"datasource","namespaces":["a"],"destinations":["nohost"]}]}`,
		`{"grants":[{"secret":{"env":"A"},"use":"httpHeader","namespaces":["a"],"destinations":["ftp://x"]}]}`,
		`{"grants":[{"secret":{"env":"A"},"use":"httpHeader","namespaces":[],"destinations":["https://x"]}]}`,
		`{"grant":[]}`} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

// TestParseComments: a line whose first non-blank character is # is a
// comment; anything else is JSON.
func TestParseComments(t *testing.T) {
	s, err := Parse([]byte("# grants\n  # indented\n{\"grants\": [\n# one\n {\"secret\": {\"env\": \"A\"}, \"use\": \"datasource\",\n\t# a comment between fields\n  \"namespaces\": [\"*\"], \"destinations\": [\"h:1\"]}]}\n# end"))
	if err != nil || s.Len() != 1 {
		t.Fatalf("%v %d", err, s.Len())
	}
	for _, bad := range []string{"", "# only a comment\n", `{"grants": [# not at a line's start
]}`} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

// TestAllowForBindsGrantsToSubjects: a grant with subjects is usable only
// by their writes; a grant without is anyone's; Allow (registry-sync's
// check at use) does not look at subjects.
func TestAllowForBindsGrantsToSubjects(t *testing.T) {
	s, err := Parse([]byte(`{"grants": [
		{"secret": {"env": "CRM_PW"}, "use": "datasource", "namespaces": ["team-a"], "destinations": ["crm.internal:3306"],
		 "subjects": [{"kind": "Group", "name": "dba"}, {"kind": "ServiceAccount", "name": "sync-bot"}]},
		{"secret": {"env": "OPEN_PW"}, "use": "datasource", "namespaces": ["team-a"], "destinations": ["open.internal:3306"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	crm, open := secret.Env("CRM_PW"), secret.Env("OPEN_PW")
	dba := &authn.Principal{Username: "alice", Groups: []string{"dba"}}
	bot := &authn.Principal{Username: "serviceaccount:sync-bot", TokenID: "t1"}
	mallory := &authn.Principal{Username: "mallory", Groups: []string{"team-a"}}
	for _, c := range []struct {
		who  *authn.Principal
		ref  secret.Ref
		dest string
		ok   bool
	}{
		{dba, crm, "crm.internal:3306", true},
		{bot, crm, "crm.internal:3306", true},
		{mallory, crm, "crm.internal:3306", false},
		{nil, crm, "crm.internal:3306", false},
		{mallory, open, "open.internal:3306", true},
		{nil, open, "open.internal:3306", true},
		{dba, crm, "evil.internal:3306", false},
	} {
		err := s.AllowFor(UseDatasource, "team-a", c.ref, c.dest, c.who)
		if (err == nil) != c.ok {
			t.Errorf("AllowFor(%v, %s, %s) = %v, want ok %v", c.who, c.ref, c.dest, err, c.ok)
		}
		if err != nil && !errors.Is(err, ErrNotGranted) {
			t.Errorf("refusal %v is not ErrNotGranted", err)
		}
	}
	if err := s.AllowFor(UseDatasource, "team-a", crm, "crm.internal:3306", mallory); err == nil || !strings.Contains(err.Error(), "bound to subjects") {
		t.Errorf("a refusal by subject says so: %v", err)
	}
	if err := s.Allow(UseDatasource, "team-a", crm, "crm.internal:3306"); err != nil {
		t.Errorf("Allow ignores subjects: %v", err)
	}
	if _, err := Parse([]byte(`{"grants": [{"secret": {"env": "X"}, "use": "datasource", "namespaces": ["a"], "destinations": ["h:1"], "subjects": [{"kind": "Robot", "name": "r"}]}]}`)); err == nil {
		t.Error("a subject of an unknown kind is accepted")
	}
}

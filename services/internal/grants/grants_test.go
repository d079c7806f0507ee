package grants

import (
	"errors"
	"testing"

	"github.com/no8s/no8s/libs/sdk/secret"
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
	var none *Set
	if none.Allow(UseHTTPHeader, "x", tok, "https://evil") != nil {
		t.Error("no file restricts")
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

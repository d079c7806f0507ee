package oidc

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestConfigValidateRefuses(t *testing.T) {
	good := Config{IssuerURL: "https://idp.example", Audiences: []string{"no8s"}}
	if err := good.Validate(); err != nil {
		t.Fatalf("valid config refused: %v", err)
	}
	for name, tc := range map[string]struct {
		mod  func(*Config)
		want string
	}{
		"no audience":          {func(c *Config) { c.Audiences = nil }, "at least one audience"},
		"empty audience":       {func(c *Config) { c.Audiences = []string{""} }, "audience is empty"},
		"skew above 5m":        {func(c *Config) { c.ClockSkew = 5*time.Minute + time.Second }, "above the maximum"},
		"negative skew":        {func(c *Config) { c.ClockSkew = -time.Second }, "negative"},
		"alg none":             {func(c *Config) { c.SigningAlgs = []string{"none"} }, `"none" is not accepted`},
		"alg HS256":            {func(c *Config) { c.SigningAlgs = []string{"RS256", "HS256"} }, `"HS256" is not accepted`},
		"http non-loopback":    {func(c *Config) { c.IssuerURL = "http://idp.example" }, "must use https"},
		"http private address": {func(c *Config) { c.IssuerURL = "http://10.0.0.1" }, "must use https"},
		"no issuer":            {func(c *Config) { c.IssuerURL = "" }, "issuer URL is required"},
		"issuer with query":    {func(c *Config) { c.IssuerURL = "https://idp.example?x=1" }, "without user, query or fragment"},
		"issuer ftp":           {func(c *Config) { c.IssuerURL = "ftp://idp.example" }, "not https"},
		"issuer relative":      {func(c *Config) { c.IssuerURL = "idp.example" }, "scheme://host"},
	} {
		c := good
		tc.mod(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate() = %v, want an error containing %q", name, err, tc.want)
		}
	}
	for _, loopback := range []string{"http://127.0.0.1:5556", "http://localhost:8080/dex", "http://[::1]:1234"} {
		c := good
		c.IssuerURL = loopback
		if err := c.Validate(); err != nil {
			t.Errorf("loopback issuer %q refused: %v", loopback, err)
		}
	}
}

func TestConfigDefaults(t *testing.T) {
	c := Config{IssuerURL: "https://idp.example", Audiences: []string{"no8s"}}.withDefaults()
	if c.UsernameClaim != "sub" || c.UsernamePrefix != "https://idp.example#" || c.GroupsClaim != "groups" ||
		c.ClockSkew != time.Minute || !reflect.DeepEqual(c.SigningAlgs, []string{"RS256", "ES256"}) {
		t.Errorf("defaults: %+v", c)
	}
	c = Config{IssuerURL: "https://idp.example", Audiences: []string{"no8s"}, UsernameClaim: "email"}.withDefaults()
	if c.UsernamePrefix != "" {
		t.Errorf("email claim: prefix %q, want none", c.UsernamePrefix)
	}
	c = Config{IssuerURL: "https://idp.example", Audiences: []string{"no8s"}, UsernamePrefix: NoPrefix}.withDefaults()
	if c.UsernamePrefix != "" {
		t.Errorf("NoPrefix: prefix %q, want none", c.UsernamePrefix)
	}
}

func TestParseIssuerSpec(t *testing.T) {
	for _, tc := range []struct {
		spec    string
		want    Config
		wantErr string
	}{
		{
			spec: "issuer=https://idp.example,audience=no8s,username-claim=email,groups-claim=groups,skew=30s",
			want: Config{IssuerURL: "https://idp.example", Audiences: []string{"no8s"}, UsernameClaim: "email", GroupsClaim: "groups", ClockSkew: 30 * time.Second},
		},
		{
			spec: "issuer=https://idp.example/realms/x, audience=a ,audience=b,username-prefix=oidc:,groups-prefix=oidc:,signing-alg=ES256,signing-alg=PS256",
			want: Config{IssuerURL: "https://idp.example/realms/x", Audiences: []string{"a", "b"}, UsernamePrefix: "oidc:", GroupsPrefix: "oidc:", SigningAlgs: []string{"ES256", "PS256"}},
		},
		{spec: "issuer=https://idp.example,audience=no8s,username-prefix=", want: Config{IssuerURL: "https://idp.example", Audiences: []string{"no8s"}}},
		{spec: "", wantErr: "empty element"},
		{spec: "issuer=https://idp.example,,audience=no8s", wantErr: "empty element"},
		{spec: "issuer=https://idp.example", wantErr: "at least one audience"},
		{spec: "audience=no8s", wantErr: "issuer URL is required"},
		{spec: "issuer=https://idp.example,audience=no8s,colour=blue", wantErr: `unknown key "colour"`},
		{spec: "issuer=https://idp.example,audience", wantErr: `"audience" is not key=value`},
		{spec: "issuer=https://idp.example,audience=no8s,skew=soon", wantErr: `key "skew"`},
		{spec: "issuer=https://idp.example,audience=no8s,skew=10m", wantErr: "above the maximum"},
		{spec: "issuer=https://a.example,issuer=https://b.example,audience=no8s", wantErr: `key "issuer" given twice`},
		{spec: "issuer=https://idp.example,audience=", wantErr: `key "audience" has an empty value`},
		{spec: "issuer=https://idp.example,audience=no8s,signing-alg=HS256", wantErr: `"HS256" is not accepted`},
		{spec: "issuer=http://idp.example,audience=no8s", wantErr: "must use https"},
	} {
		got, err := ParseIssuerSpec(tc.spec)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseIssuerSpec(%q) = %+v, %v; want an error containing %q", tc.spec, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseIssuerSpec(%q): %v", tc.spec, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseIssuerSpec(%q) = %+v, want %+v", tc.spec, got, tc.want)
		}
	}
}

// FuzzParseIssuerSpec: no input panics, and whatever parses is a valid
// Config.
func FuzzParseIssuerSpec(f *testing.F) {
	f.Add("issuer=https://idp.example,audience=no8s,username-claim=email,groups-claim=groups,skew=30s")
	f.Add("issuer=http://127.0.0.1:1,audience=a,audience=b,signing-alg=ES256,username-prefix=")
	f.Add("issuer=,audience=,,=")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseIssuerSpec(s)
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("ParseIssuerSpec(%q) returned an invalid config: %v", s, err)
		}
	})
}

package oidc

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Defaults and limits of a Config.
const (
	// DefaultClockSkew is the leeway on exp, nbf and iat when
	// Config.ClockSkew is zero.
	DefaultClockSkew = time.Minute
	// MaxClockSkew is the largest ClockSkew Validate accepts.
	MaxClockSkew = 5 * time.Minute
	// DefaultUsernameClaim is the claim naming the user when
	// Config.UsernameClaim is empty.
	DefaultUsernameClaim = "sub"
	// DefaultGroupsClaim is the claim listing the groups when
	// Config.GroupsClaim is empty.
	DefaultGroupsClaim = "groups"
	// NoPrefix as Config.UsernamePrefix means no prefix, even for the "sub"
	// claim (as kube-apiserver's "-").
	NoPrefix = "-"
)

// DefaultSigningAlgs are the algorithms accepted when Config.SigningAlgs is
// empty. It is a function so that no caller can change the default.
func DefaultSigningAlgs() []string { return []string{"RS256", "ES256"} }

// acceptableAlgs are the algorithms a Config may name: asymmetric ones only
// (never "none", never HMAC, whose key would be public here).
var acceptableAlgs = []string{
	"RS256", "RS384", "RS512",
	"ES256", "ES384", "ES512",
	"PS256", "PS384", "PS512",
	"EdDSA",
}

// Config is one trusted issuer.
type Config struct {
	// IssuerURL is the issuer, exactly as in its tokens' iss claim and its
	// discovery document: https, or http only for loopback hosts (tests and
	// development).
	IssuerURL string
	// Audiences: a token's aud must contain one of them (at least one is
	// required).
	Audiences []string
	// UsernameClaim names the claim holding the username; default "sub",
	// e.g. "email" or "preferred_username".
	UsernameClaim string
	// UsernamePrefix is prepended to the username. Empty means the default:
	// IssuerURL+"#" when the claim is "sub", none otherwise (as
	// kube-apiserver). NoPrefix ("-") means none in every case.
	UsernamePrefix string
	// GroupsClaim names the claim holding the groups, a string or an array
	// of strings; default "groups". A missing claim means no groups.
	GroupsClaim string
	// GroupsPrefix is prepended to each group; default none.
	GroupsPrefix string
	// ClockSkew is the leeway on exp, nbf and iat; zero means
	// DefaultClockSkew. Refused when negative or above MaxClockSkew.
	ClockSkew time.Duration
	// SigningAlgs are the accepted JWS algorithms; default
	// DefaultSigningAlgs. "none" and HS* are refused.
	SigningAlgs []string
}

// Validate reports what is wrong with c, if anything.
func (c Config) Validate() error {
	var errs []error
	if err := validateIssuerURL(c.IssuerURL); err != nil {
		errs = append(errs, err)
	}
	if len(c.Audiences) == 0 {
		errs = append(errs, errors.New("at least one audience is required"))
	}
	for _, a := range c.Audiences {
		if a == "" {
			errs = append(errs, errors.New("an audience is empty"))
		}
	}
	if c.ClockSkew < 0 {
		errs = append(errs, fmt.Errorf("clock skew %s is negative", c.ClockSkew))
	}
	if c.ClockSkew > MaxClockSkew {
		errs = append(errs, fmt.Errorf("clock skew %s is above the maximum %s", c.ClockSkew, MaxClockSkew))
	}
	for _, alg := range c.SigningAlgs {
		if !slices.Contains(acceptableAlgs, alg) {
			errs = append(errs, fmt.Errorf("signing algorithm %q is not accepted (accepted: %s)", alg, strings.Join(acceptableAlgs, ", ")))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("oidc issuer %q: %w", c.IssuerURL, err)
	}
	return nil
}

// validateIssuerURL accepts an absolute https URL without query or
// fragment, or an http one whose host is a loopback address.
func validateIssuerURL(s string) error {
	if s == "" {
		return errors.New("issuer URL is required")
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("issuer URL: %w", err)
	}
	if u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return errors.New("issuer URL must be scheme://host[/path] without user, query or fragment")
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if isLoopback(u.Hostname()) {
			return nil
		}
		return errors.New("issuer URL must use https (http only for loopback hosts)")
	default:
		return fmt.Errorf("issuer URL scheme %q is not https", u.Scheme)
	}
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// withDefaults returns c with its empty fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.UsernameClaim == "" {
		c.UsernameClaim = DefaultUsernameClaim
	}
	switch c.UsernamePrefix {
	case "":
		if c.UsernameClaim == "sub" {
			c.UsernamePrefix = c.IssuerURL + "#"
		}
	case NoPrefix:
		c.UsernamePrefix = ""
	}
	if c.GroupsClaim == "" {
		c.GroupsClaim = DefaultGroupsClaim
	}
	if c.ClockSkew == 0 {
		c.ClockSkew = DefaultClockSkew
	}
	if len(c.SigningAlgs) == 0 {
		c.SigningAlgs = DefaultSigningAlgs()
	}
	c.Audiences = slices.Clone(c.Audiences)
	c.SigningAlgs = slices.Clone(c.SigningAlgs)
	return c
}

// specKeys are the keys of an issuer spec.
var specKeys = []string{"issuer", "audience", "username-claim", "username-prefix", "groups-claim", "groups-prefix", "skew", "signing-alg"}

// ParseIssuerSpec reads one issuer from a flag value: comma-separated
// key=value pairs, e.g.
//
//	issuer=https://idp.example,audience=no8s,username-claim=email,groups-claim=groups,skew=30s
//
// Keys: issuer (required), audience (required, repeatable), username-claim,
// username-prefix, groups-claim, groups-prefix, skew (a Go duration) and
// signing-alg (repeatable). The result is validated.
func ParseIssuerSpec(s string) (Config, error) {
	var c Config
	seen := map[string]bool{}
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			return Config{}, errors.New("oidc issuer spec: empty element (stray comma?)")
		}
		key, value, ok := strings.Cut(part, "=")
		key = strings.TrimSpace(key)
		value = strings.TrimSpace(value)
		if !ok {
			return Config{}, fmt.Errorf("oidc issuer spec: %q is not key=value", truncate(part))
		}
		if !slices.Contains(specKeys, key) {
			return Config{}, fmt.Errorf("oidc issuer spec: unknown key %q (known: %s)", truncate(key), strings.Join(specKeys, ", "))
		}
		repeatable := key == "audience" || key == "signing-alg"
		if seen[key] && !repeatable {
			return Config{}, fmt.Errorf("oidc issuer spec: key %q given twice", truncate(key))
		}
		seen[key] = true
		if value == "" && key != "username-prefix" && key != "groups-prefix" {
			return Config{}, fmt.Errorf("oidc issuer spec: key %q has an empty value", key)
		}
		switch key {
		case "issuer":
			c.IssuerURL = value
		case "audience":
			c.Audiences = append(c.Audiences, value)
		case "username-claim":
			c.UsernameClaim = value
		case "username-prefix":
			c.UsernamePrefix = value
		case "groups-claim":
			c.GroupsClaim = value
		case "groups-prefix":
			c.GroupsPrefix = value
		case "skew":
			d, err := time.ParseDuration(value)
			if err != nil {
				return Config{}, fmt.Errorf("oidc issuer spec: key \"skew\": %w", err)
			}
			c.ClockSkew = d
		case "signing-alg":
			c.SigningAlgs = append(c.SigningAlgs, value)
		}
	}
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("oidc issuer spec: %w", err)
	}
	return c, nil
}

// truncate shortens untrusted text quoted in an error.
func truncate(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}

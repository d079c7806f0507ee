// Package config is the no8s CLI's configuration: a YAML file of named
// contexts (server URL, namespace, token, and for a token from no8s login
// what refreshing it takes), the current one, and how flags and
// environment variables override them (docs/cli.md).
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"go.yaml.in/yaml/v3"

	"github.com/no8s/no8s/libs/api/names"
)

// Environment variables the CLI reads.
const (
	EnvConfig    = "NO8S_CONFIG"
	EnvContext   = "NO8S_CONTEXT"
	EnvServer    = "NO8S_SERVER"
	EnvNamespace = "NO8S_NAMESPACE"
	EnvToken     = "NO8S_TOKEN"
	EnvCAFile    = "NO8S_CA_FILE"
)

// DefaultServer is the server when nothing else says (the namespace is
// then names.DefaultNamespace).
const DefaultServer = "http://127.0.0.1:8000"

// File is the configuration file.
type File struct {
	CurrentContext string    `yaml:"current-context,omitempty"`
	Contexts       []Context `yaml:"contexts,omitempty"`
}

// Context is one named set of connection settings.
type Context struct {
	Name      string `yaml:"name"`
	Server    string `yaml:"server,omitempty"`
	Namespace string `yaml:"namespace,omitempty"`
	// Token is sent as a bearer token: an API token, or the OIDC ID token
	// no8s login stored.
	Token string `yaml:"token,omitempty"`
	// CAFile is a PEM file of the CA certificates trusted, alone, for an
	// https server's certificate (no8s dev --tls: <data-dir>/tls/ca.crt).
	CAFile string `yaml:"ca-file,omitempty"`
	// OIDC is set by no8s login: Token is then an ID token of this issuer,
	// refreshed with the refresh token when it expires.
	OIDC *OIDC `yaml:"oidc,omitempty"`
}

// OIDC is where a context's ID token comes from and what refreshing it
// takes. RefreshToken and ClientSecret are secrets, as Token is.
type OIDC struct {
	Issuer       string   `yaml:"issuer"`
	ClientID     string   `yaml:"client_id"`
	ClientSecret string   `yaml:"client_secret,omitempty"`
	RefreshToken string   `yaml:"refresh_token,omitempty"`
	Scopes       []string `yaml:"scopes,omitempty"`
}

// DefaultPath is $NO8S_CONFIG, else no8s/config.yaml in the user's
// configuration directory (~/.config on Linux).
func DefaultPath(getenv func(string) string) string {
	if p := getenv(EnvConfig); p != "" {
		return p
	}
	dir := getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home := getenv("HOME")
		if home == "" {
			return ""
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "no8s", "config.yaml")
}

// Load reads the file at path; a missing file is an empty configuration.
func Load(path string) (*File, error) {
	f := &File{}
	if path == "" {
		return f, nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return f, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read configuration: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(f); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("configuration %s: %w", path, err)
	}
	seen := map[string]bool{}
	for i, c := range f.Contexts {
		if c.Name == "" {
			return nil, fmt.Errorf("configuration %s: /contexts/%d/name: a context needs a name", path, i)
		}
		if seen[c.Name] {
			return nil, fmt.Errorf("configuration %s: /contexts/%d/name: context %q is defined twice", path, i, c.Name)
		}
		seen[c.Name] = true
	}
	return f, nil
}

// Save writes the file at path (0600: it may hold a token), creating its
// folder.
func (f *File) Save(path string) error {
	if path == "" {
		return errors.New("no configuration path: set $NO8S_CONFIG or $HOME")
	}
	data, err := yaml.Marshal(f)
	if err != nil {
		return fmt.Errorf("encode configuration: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create configuration folder: %w", err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("write configuration: %w", err)
	}
	return nil
}

// Context returns the context named name; nil when there is none.
func (f *File) Context(name string) *Context {
	i := slices.IndexFunc(f.Contexts, func(c Context) bool { return c.Name == name })
	if i < 0 {
		return nil
	}
	return &f.Contexts[i]
}

// Set adds or replaces a context.
func (f *File) Set(c Context) {
	if cur := f.Context(c.Name); cur != nil {
		*cur = c
		return
	}
	f.Contexts = append(f.Contexts, c)
}

// Overrides are what flags and environment say; empty means "not given".
type Overrides struct {
	Context, Server, Namespace, Token, CAFile string
}

// Resolved is the configuration in force.
type Resolved struct {
	Context   string // "" when none is used
	Server    string
	Namespace string
	Token     string
	CAFile    string
	// OIDC is the context's OIDC settings when Token is the context's (a
	// token from a flag or the environment is never refreshed); else nil.
	OIDC *OIDC
}

// ContextName is the context in force: the flag's, else the environment
// variable's, else the file's current context ("" when none says).
func (f *File) ContextName(flags, env Overrides) string {
	return first(flags.Context, env.Context, f.CurrentContext)
}

// Resolve picks the context (flag, then $NO8S_CONTEXT, then the file's
// current context) and lays flags over it: each setting comes from its
// flag, else its environment variable, else the context, else the default.
// flags and env are Overrides from the command line and the environment.
func (f *File) Resolve(flags, env Overrides) (Resolved, error) {
	name := f.ContextName(flags, env)
	var ctx Context
	if name != "" {
		c := f.Context(name)
		if c == nil {
			return Resolved{}, fmt.Errorf("context %q is not in the configuration (no8s config get-contexts lists them)", name)
		}
		ctx = *c
	}
	r := Resolved{
		Context:   name,
		Server:    first(flags.Server, env.Server, ctx.Server, DefaultServer),
		Namespace: first(flags.Namespace, env.Namespace, ctx.Namespace, names.DefaultNamespace),
		Token:     first(flags.Token, env.Token, ctx.Token),
		CAFile:    first(flags.CAFile, env.CAFile, ctx.CAFile),
	}
	if flags.Token == "" && env.Token == "" && ctx.OIDC != nil {
		o := *ctx.OIDC
		r.OIDC = &o
	}
	return r, nil
}

func first(v ...string) string {
	for _, s := range v {
		if s != "" {
			return s
		}
	}
	return ""
}

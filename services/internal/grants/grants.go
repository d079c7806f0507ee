// Package grants says which secret references a namespace's TenantRegistries
// and HttpSources may use, and where each credential may be sent. It is
// read from a configuration file (--credential-grants) by admission, which
// refuses a registry or source asking for a credential outside its grant,
// and by registry-sync, which refuses it again before resolving the
// secret. Datasource credentials and HTTP header values are granted apart
// (a grant has one use), so a database password cannot be sent as a
// header. Without a file, references are not restricted by grants (the
// services say so at start): production sets one.
package grants

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/libs/sdk/secret"
)

// The uses of a credential.
const (
	// UseDatasource: a TenantRegistry's usernameRef or passwordRef, sent
	// to a datasource host:port.
	UseDatasource = "datasource"
	// UseHTTPHeader: an HttpSource header's value, sent to an HTTP
	// origin.
	UseHTTPHeader = "httpHeader"
)

// ErrNotGranted is matched (errors.Is) by every refusal.
var ErrNotGranted = errors.New("the credential is not granted")

// Grant lets the namespaces use one secret reference for one use, sent
// only to the destinations.
type Grant struct {
	// Secret is the reference ({"env": "NAME"} or {"file": "/path"}).
	Secret secret.Ref `json:"secret"`
	// Use is UseDatasource or UseHTTPHeader.
	Use string `json:"use"`
	// Namespaces may use it ("*": every namespace).
	Namespaces []string `json:"namespaces"`
	// Destinations it may be sent to: host:port for a datasource (the
	// port written out), an origin (scheme://host[:port]) for a header.
	Destinations []string `json:"destinations"`
}

// Set is the grants of a file. A nil *Set grants everything (no file).
type Set struct {
	grants []Grant
}

// Load reads the grants file at path; "" is no file (nil, nil).
func Load(path string) (*Set, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("credential grants: %w", err)
	}
	s, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("credential grants %s: %w", path, err)
	}
	return s, nil
}

// Parse reads a grants document: {"grants": [Grant, ...]}, unknown fields
// refused, every grant complete and its destinations in their canonical
// form.
func Parse(data []byte) (*Set, error) {
	var doc struct {
		Grants []Grant `json:"grants"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	s := &Set{}
	for i, g := range doc.Grants {
		at := fmt.Sprintf("grants[%d]", i)
		if g.Secret.IsZero() {
			return nil, fmt.Errorf("%s: secret is required", at)
		}
		if len(g.Namespaces) == 0 || len(g.Destinations) == 0 {
			return nil, fmt.Errorf("%s: namespaces and destinations are required", at)
		}
		for _, ns := range g.Namespaces {
			if ns != "*" && names.Namespace("", ns) != nil {
				return nil, fmt.Errorf("%s: namespace %q is not a namespace name (or *)", at, ns)
			}
		}
		for j, d := range g.Destinations {
			var canon string
			var err error
			switch g.Use {
			case UseDatasource:
				canon, err = hostPort(d)
			case UseHTTPHeader:
				canon, err = Origin(d)
			default:
				return nil, fmt.Errorf("%s: use %q: want %s or %s", at, g.Use, UseDatasource, UseHTTPHeader)
			}
			if err != nil {
				return nil, fmt.Errorf("%s: destination %q: %w", at, d, err)
			}
			g.Destinations[j] = canon
		}
		s.grants = append(s.grants, g)
	}
	return s, nil
}

// Allow says whether namespace ns may use ref for use, sent to dest
// (Datasource or Origin's form): nil, or an error wrapping ErrNotGranted
// that names the reference, the namespace, the use and the destination
// (never the secret).
func (s *Set) Allow(use, ns string, ref secret.Ref, dest string) error {
	if s == nil {
		return nil
	}
	for _, g := range s.grants {
		if g.Use == use && g.Secret == ref && (slices.Contains(g.Namespaces, ns) || slices.Contains(g.Namespaces, "*")) &&
			slices.Contains(g.Destinations, dest) {
			return nil
		}
	}
	return fmt.Errorf("%w: no grant lets namespace %q use %s as %s sent to %s (see --credential-grants)", ErrNotGranted, ns, ref, use, dest)
}

// Datasource is a datasource's destination: host:port, the host in lower
// case.
func Datasource(host string, port int) string {
	return net.JoinHostPort(strings.ToLower(host), strconv.Itoa(port))
}

func hostPort(d string) (string, error) {
	host, port, err := net.SplitHostPort(d)
	if err != nil {
		return "", fmt.Errorf("want host:port: %w", err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 || host == "" {
		return "", errors.New("want host:port with a port 1-65535")
	}
	return Datasource(host, p), nil
}

// Origin is the origin of an http(s) URL: scheme://host[:port], lower
// case, the scheme's default port dropped, no path.
func Origin(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" || u.Hostname() == "" {
		return "", errors.New("want an http(s) URL with a host")
	}
	host := strings.ToLower(u.Hostname())
	port := u.Port()
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	if port != "" {
		host = net.JoinHostPort(host, port)
	} else if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return scheme + "://" + host, nil
}

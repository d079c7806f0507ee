// Package grants says which secret references a namespace's TenantRegistries
// and HttpSources may use, and where each credential may be sent. It is
// read from a configuration file (--credential-grants) by admission, which
// refuses a registry or source asking for a credential outside its grant,
// and by registry-sync, which refuses it again before resolving the
// secret. Datasource credentials and HTTP header values are granted apart
// (a grant has one use), so a database password cannot be sent as a
// header. Nothing is granted without a file: every secret reference is
// then refused, and the refusal says how to grant it.
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
	"github.com/no8s/no8s/libs/platform/secret"
	"github.com/no8s/no8s/services/internal/authn"
	"github.com/no8s/no8s/services/internal/rbac"
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
	// Subjects, when given, bind the grant to identities: only a write by
	// one of them (a user, group, service account or token, as a role
	// binding names them) may use it. Admission checks them at every
	// write; empty: any writer.
	Subjects []rbac.Subject `json:"subjects,omitempty"`
}

// Set is the grants of a file. A nil *Set is no file: it grants nothing.
type Set struct {
	grants []Grant
}

// Load reads the grants file at path; "" is no file (nil, nil), which
// grants nothing.
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

// Parse reads a grants document: JSON {"grants": [Grant, ...]}, unknown
// fields refused, every grant complete (New). A line whose first
// non-blank character is # is a comment (no JSON token starts with #, and
// a JSON string cannot span lines, so such a line is never part of the
// document).
func Parse(data []byte) (*Set, error) {
	var doc struct {
		Grants []Grant `json:"grants"`
	}
	dec := json.NewDecoder(bytes.NewReader(stripComments(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	return New(doc.Grants...)
}

// stripComments blanks the comment lines of data, keeping every offset.
func stripComments(data []byte) []byte {
	out := bytes.Clone(data)
	for _, line := range bytes.SplitAfter(out, []byte("\n")) {
		if t := bytes.TrimLeft(line, " \t\r"); len(t) > 0 && t[0] == '#' {
			for j := range line {
				if line[j] != '\n' {
					line[j] = ' '
				}
			}
		}
	}
	return out
}

// New is the set of gs, each checked complete and its destinations put in
// their canonical form (gs is not modified).
func New(gs ...Grant) (*Set, error) {
	s := &Set{}
	for i, g := range gs {
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
		for j, sub := range g.Subjects {
			if !rbac.IsSubjectKind(sub.Kind) || strings.TrimSpace(sub.Name) == "" {
				return nil, fmt.Errorf("%s: subjects[%d]: want a kind (%s) and a name", at, j, strings.Join(rbac.SubjectKinds(), ", "))
			}
		}
		g.Destinations = slices.Clone(g.Destinations)
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
// (never the secret) and says how to grant it: the grant to list, the
// flag and environment variable naming the file, and the design page. A
// nil Set (no file) refuses every reference.
//
// Allow does not look at a grant's subjects (registry-sync, which
// resolves the secret, does not know who wrote the resource: admission
// checked that with AllowFor).
func (s *Set) Allow(use, ns string, ref secret.Ref, dest string) error {
	return s.allow(use, ns, ref, dest, func(Grant) bool { return true })
}

// AllowFor is Allow for a write by writer: a grant bound to subjects
// counts only when writer is one of them (nil, a service identity's write,
// is none of them).
func (s *Set) AllowFor(use, ns string, ref secret.Ref, dest string, writer *authn.Principal) error {
	return s.allow(use, ns, ref, dest, func(g Grant) bool {
		if len(g.Subjects) == 0 {
			return true
		}
		if writer == nil {
			return false
		}
		for _, sub := range rbac.Subjects(writer) {
			if slices.Contains(g.Subjects, sub) {
				return true
			}
		}
		return false
	})
}

func (s *Set) allow(use, ns string, ref secret.Ref, dest string, writerOK func(Grant) bool) error {
	if s == nil {
		return fmt.Errorf("%w: no credential grants file is set, so no secret reference may be used; %s", ErrNotGranted, howTo(use, ns, ref, dest))
	}
	bound := false
	for _, g := range s.grants {
		if g.Use == use && g.Secret == ref && (slices.Contains(g.Namespaces, ns) || slices.Contains(g.Namespaces, "*")) &&
			slices.Contains(g.Destinations, dest) {
			if writerOK(g) {
				return nil
			}
			bound = true
		}
	}
	if bound {
		return fmt.Errorf("%w: the grants that let namespace %q use %s as %s sent to %s are bound to subjects, and this write's author is none of them", ErrNotGranted, ns, ref, use, dest)
	}
	return fmt.Errorf("%w: no grant lets namespace %q use %s as %s sent to %s; %s", ErrNotGranted, ns, ref, use, dest, howTo(use, ns, ref, dest))
}

// Len is the number of grants (0 for no file).
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.grants)
}

// DocsRef is where the grants are explained.
const DocsRef = "docs/design/tenants.md#credential-grants"

// howTo says how to grant ref to namespace ns for use, sent to dest.
func howTo(use, ns string, ref secret.Ref, dest string) string {
	g, err := json.Marshal(Grant{Secret: ref, Use: use, Namespaces: []string{ns}, Destinations: []string{dest}})
	if err != nil { // a Grant always marshals
		g = []byte(err.Error())
	}
	return fmt.Sprintf(`to grant it, list %s in the "grants" of the credential grants file that admission and registry-sync read `+
		`(--credential-grants or %s; no8s dev: %s in its data directory unless the flag names another) and restart them; see %s`,
		g, EnvFile, DevFile, DocsRef)
}

// DevFile is the grants file that no8s dev keeps in its data directory
// when --credential-grants names none.
const DevFile = "credential-grants.json"

// EnvFile is the environment variable naming the grants file, the
// default of --credential-grants.
const EnvFile = "NO8S_CREDENTIAL_GRANTS"

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

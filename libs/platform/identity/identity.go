// Package identity names the processes of a no8s installation and carries
// their names over TLS.
//
// Every process (each service, each reconciler deployment, automation using
// the CLI) holds a certificate issued by the installation's certificate
// authority. The identity is the certificate's URI subject alternative name,
// spiffe://no8s/<kind>/<name> (spiffe://no8s/service/store,
// spiffe://no8s/reconciler/noop). A reconciler's certificate also names the
// resource types it may serve, one organizational unit "type:<Name>/<version>"
// each, fixed when the certificate is issued.
//
// Credentials are three PEM files in one directory, the layout of a
// Kubernetes TLS secret with its CA: tls.crt, tls.key and ca.crt (one or
// more CA certificates: during a CA rotation both the old and the new one).
// A process reads them again when they change on disk, so a renewed
// certificate is used for new connections without a restart.
package identity

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/no8s/no8s/libs/api/names"
)

// TrustDomain is the host part of every identity's URI.
const TrustDomain = "no8s"

// typeUnitPrefix marks the organizational units that carry type claims.
const typeUnitPrefix = "type:"

// Kind is what sort of process an identity names.
type Kind string

// The kinds of identity.
const (
	// Service is one of the control plane's own services (store, admission,
	// gateway, scheduler, registry-sync).
	Service Kind = "service"
	// Reconciler is a reconciler deployment: every replica holds the same
	// identity, named as the reconciler registers.
	Reconciler Kind = "reconciler"
	// Client is automation calling the public API with the CLI or a library.
	Client Kind = "client"
	// Publisher is a client that sends changes over NATS: it publishes on
	// the input subjects and reads their outcomes. Its credentials are a
	// NATS user alone (NATSCredsFile), no certificate.
	Publisher Kind = "publisher"
	// Reader is a client that reads the event stream over NATS (watchers,
	// third-party readers). Its credentials are a NATS user alone.
	Reader Kind = "reader"
	// NATSAdmin is an operator's break-glass NATS user: it may do anything
	// on the installation's NATS account (inspect, repair or remove
	// streams). Only who holds the CA issues it; keep it short-lived. Its
	// credentials are a NATS user alone.
	NATSAdmin Kind = "nats-admin"
)

// The control plane's services, by the name their identities carry.
const (
	Store        = "store"
	Admission    = "admission"
	Gateway      = "gateway"
	Scheduler    = "scheduler"
	RegistrySync = "registry-sync"
)

// Services lists the control plane's service names.
func Services() []string { return []string{Store, Admission, Gateway, Scheduler, RegistrySync} }

// ErrInvalid is wrapped by every error about a malformed identity.
var ErrInvalid = errors.New("identity: invalid")

// ID is one process's identity.
type ID struct {
	Kind Kind
	Name string
	// Types are the resource types ("Name/version") a reconciler identity
	// may serve; empty for the other kinds.
	Types []string
}

// ServiceID is the identity of the control plane service name.
func ServiceID(name string) ID { return ID{Kind: Service, Name: name} }

// String is "<kind>/<name>", as logs and the security table show it.
func (id ID) String() string { return string(id.Kind) + "/" + id.Name }

// URI is the identity as a certificate carries it.
func (id ID) URI() *url.URL {
	return &url.URL{Scheme: "spiffe", Host: TrustDomain, Path: "/" + string(id.Kind) + "/" + id.Name}
}

// Is reports whether id has kind k and name n (its type claims aside).
func (id ID) Is(k Kind, n string) bool { return id.Kind == k && id.Name == n }

// Serves reports whether id may serve the type "Name/version".
func (id ID) Serves(typeRef string) bool { return slices.Contains(id.Types, typeRef) }

// Validate checks id: a known kind, a name by the resource name rule (a
// DNS-1123 label, usable as a finalizer suffix), a known service name for a
// service, and type claims only on a reconciler, each a valid type and
// version.
func (id ID) Validate() error {
	switch id.Kind {
	case Service:
		if !slices.Contains(Services(), id.Name) {
			return fmt.Errorf("%w: unknown service %q (one of %s)", ErrInvalid, id.Name, strings.Join(Services(), ", "))
		}
	case Reconciler, Client, Publisher, Reader, NATSAdmin:
		if fe := names.Name(string(id.Kind)+" name", id.Name); fe != nil {
			return fmt.Errorf("%w: %s: %s", ErrInvalid, fe.Path, fe.Message)
		}
	default:
		return fmt.Errorf("%w: unknown kind %q (service, reconciler, client, publisher, reader or nats-admin)", ErrInvalid, id.Kind)
	}
	if len(id.Types) > 0 && id.Kind != Reconciler {
		return fmt.Errorf("%w: only a reconciler identity carries types", ErrInvalid)
	}
	for _, t := range id.Types {
		if err := validType(t); err != nil {
			return err
		}
	}
	return nil
}

// validType checks one type claim, "Name/version".
func validType(t string) error {
	name, version, ok := strings.Cut(t, "/")
	if !ok {
		return fmt.Errorf("%w: type %q: want Name/version", ErrInvalid, t)
	}
	fe := names.TypeName("type name", name)
	if fe == nil {
		fe = names.TypeVersion("type version", version)
	}
	if fe != nil {
		return fmt.Errorf("%w: type %q: %s: %s", ErrInvalid, t, fe.Path, fe.Message)
	}
	return nil
}

// TypeUnits are the organizational units that carry id's type claims.
func (id ID) TypeUnits() []string {
	units := make([]string, len(id.Types))
	for i, t := range id.Types {
		units[i] = typeUnitPrefix + t
	}
	return units
}

// Parse reads the identity a certificate carries: exactly one URI SAN in
// the no8s trust domain, and the type claims of its organizational units.
// It does not verify the certificate: the TLS handshake has done that.
func Parse(cert *x509.Certificate) (ID, error) {
	var found []*url.URL
	for _, u := range cert.URIs {
		if u.Scheme == "spiffe" && u.Host == TrustDomain {
			found = append(found, u)
		}
	}
	if len(found) != 1 {
		return ID{}, fmt.Errorf("%w: certificate %q carries %d no8s identities, want 1", ErrInvalid, cert.Subject.CommonName, len(found))
	}
	kind, name, ok := strings.Cut(strings.TrimPrefix(found[0].Path, "/"), "/")
	if !ok {
		return ID{}, fmt.Errorf("%w: identity URI %q: want spiffe://%s/<kind>/<name>", ErrInvalid, found[0], TrustDomain)
	}
	id := ID{Kind: Kind(kind), Name: name}
	for _, ou := range cert.Subject.OrganizationalUnit {
		if t, ok := strings.CutPrefix(ou, typeUnitPrefix); ok {
			id.Types = append(id.Types, t)
		}
	}
	if err := id.Validate(); err != nil {
		return ID{}, err
	}
	return id, nil
}

// NATSOnly reports whether identities of kind k are NATS users alone, with
// no certificate (publishers, readers and NATS admins).
func (k Kind) NATSOnly() bool { return k == Publisher || k == Reader || k == NATSAdmin }

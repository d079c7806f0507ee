package identity_test

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"net/url"
	"testing"

	"github.com/no8s/no8s/libs/platform/identity"
)

func cert(cn string, ous []string, uris ...string) *x509.Certificate {
	c := &x509.Certificate{Subject: pkix.Name{CommonName: cn, OrganizationalUnit: ous}}
	for _, u := range uris {
		p, err := url.Parse(u)
		if err != nil {
			panic(err)
		}
		c.URIs = append(c.URIs, p)
	}
	return c
}

func TestParse(t *testing.T) {
	id, err := identity.Parse(cert("x", []string{"type:Noop/v1", "team-a", "type:Db/v1beta1"}, "https://example.com/x", "spiffe://no8s/reconciler/noop"))
	if err != nil {
		t.Fatal(err)
	}
	if id.String() != "reconciler/noop" || len(id.Types) != 2 || !id.Serves("Noop/v1") || !id.Serves("Db/v1beta1") || id.Serves("team-a") {
		t.Fatalf("got %+v", id)
	}
	if got := id.URI().String(); got != "spiffe://no8s/reconciler/noop" {
		t.Fatalf("URI %s", got)
	}
	if id, err := identity.Parse(cert("", nil, identity.ServiceID(identity.RegistrySync).URI().String())); err != nil || !id.Is(identity.Service, identity.RegistrySync) {
		t.Fatalf("service: %+v, %v", id, err)
	}

	for name, c := range map[string]*x509.Certificate{
		"no identity":          cert("store", nil),
		"another domain":       cert("", nil, "spiffe://example.org/service/store"),
		"two identities":       cert("", nil, "spiffe://no8s/service/store", "spiffe://no8s/service/gateway"),
		"no name":              cert("", nil, "spiffe://no8s/service"),
		"unknown service":      cert("", nil, "spiffe://no8s/service/evil"),
		"unknown kind":         cert("", nil, "spiffe://no8s/admin/root"),
		"name not a label":     cert("", nil, "spiffe://no8s/reconciler/a/b"),
		"types on a service":   cert("", []string{"type:Noop/v1"}, "spiffe://no8s/service/store"),
		"type without version": cert("", []string{"type:Noop"}, "spiffe://no8s/reconciler/noop"),
		"bad type version":     cert("", []string{"type:Noop/1"}, "spiffe://no8s/reconciler/noop"),
	} {
		if id, err := identity.Parse(c); !errors.Is(err, identity.ErrInvalid) {
			t.Errorf("%s: got %+v, %v; want ErrInvalid", name, id, err)
		}
	}
}

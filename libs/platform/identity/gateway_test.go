package identity

import "testing"

// A client calls the gateway as its identity only with credentials and an
// https URL (the service listener); otherwise it is plain.
func TestGatewayTLS(t *testing.T) {
	var none *Credentials
	some := &Credentials{}
	for _, c := range []struct {
		creds *Credentials
		url   string
		tls   bool
	}{
		{none, "https://127.0.0.1:8443", false},
		{some, "http://127.0.0.1:8000", false},
		{some, "://bad", false},
		{some, "https://127.0.0.1:8443", true},
	} {
		got := c.creds.GatewayTLS(c.url)
		if (got != nil) != c.tls {
			t.Errorf("creds %v, %s: TLS %v, want %v", c.creds != nil, c.url, got != nil, c.tls)
		}
		if got != nil && got.VerifyConnection == nil {
			t.Errorf("%s: the server's identity is not checked", c.url)
		}
	}
}

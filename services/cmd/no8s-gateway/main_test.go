package main

import (
	"testing"

	"github.com/no8s/no8s/services/internal/flagenv/flagenvtest"
)

// TestEnvironment: every flag of no8s-gateway has its environment variable by the
// rule, and every name documented before the rule still works.
func TestEnvironment(t *testing.T) {
	flagenvtest.Check(t, newCommand, []flagenvtest.Old{
		{Flag: "nats-url", Env: "NATS_URL"},
		{Flag: "listen", Env: "NO8S_GATEWAY_LISTEN"},
		{Flag: "service-listen", Env: "NO8S_GATEWAY_SERVICE_LISTEN"},
		{Flag: "allowed-origins", Env: "NO8S_GATEWAY_ALLOWED_ORIGINS"},
		{Flag: "allowed-hosts", Env: "NO8S_GATEWAY_ALLOWED_HOSTS"},
		{Flag: "tls-cert-file", Env: "NO8S_GATEWAY_TLS_CERT_FILE"},
		{Flag: "tls-key-file", Env: "NO8S_GATEWAY_TLS_KEY_FILE"},
		{Flag: "rate-limit", Env: "NO8S_GATEWAY_RATE_LIMIT"},
		{Flag: "rate-burst", Env: "NO8S_GATEWAY_RATE_BURST"},
		{Flag: "max-watches-per-identity", Env: "NO8S_GATEWAY_MAX_WATCHES_PER_IDENTITY"},
		{Flag: "max-body-reads-per-source", Env: "NO8S_GATEWAY_MAX_BODY_READS_PER_SOURCE"},
		{Flag: "public-paths", Env: "NO8S_GATEWAY_PUBLIC_PATHS"},
	})
}

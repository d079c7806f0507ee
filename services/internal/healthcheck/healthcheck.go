// Package healthcheck is the `healthcheck` command every no8s binary has: it
// probes the process's own /readyz and exits 0 when it answers 200, 1
// otherwise. A container image built FROM scratch has no curl or wget, so
// Compose health checks and Kubernetes exec probes run the binary itself:
//
//	healthcheck: {test: ["CMD", "no8s-store", "healthcheck"]}
//
// The address is the one the process listens on (the same environment
// variable and default as its flag), or --addr; an unspecified host (":8081",
// "0.0.0.0:7101", "[::]:7101") is probed on loopback.
package healthcheck

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// Timeout bounds one probe, the HTTP exchange included.
const Timeout = 5 * time.Second

// Probe GETs /readyz at the listen address addr (see DialAddr) and returns
// nil when it answers 200, else an error carrying the answer's status and
// the start of its body. A listener that serves TLS (the gateway with
// --tls-cert-file, no8s dev --tls) answers the plain request with Go's
// "HTTP request to an HTTPS server" 400: the probe is sent again over
// TLS, without checking the certificate, which names the service for its
// clients: the probe asks its own process on loopback whether it is ready.
func Probe(ctx context.Context, addr string) error {
	target, err := DialAddr(addr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	status, body, err := probe(ctx, "http://"+target+"/readyz", nil)
	if err == nil && status == http.StatusBadRequest && strings.Contains(string(body), "HTTP request to an HTTPS server") {
		status, body, err = probe(ctx, "https://"+target+"/readyz", &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // its own process, on loopback
	}
	if err != nil {
		return fmt.Errorf("healthcheck %s: %w", target, err)
	}
	if status != http.StatusOK {
		return fmt.Errorf("healthcheck %s: /readyz answered %d %s: %s", target, status, http.StatusText(status), body)
	}
	return nil
}

// probe GETs url and returns the status and the start of the body.
func probe(ctx context.Context, url string, tlsConfig *tls.Config) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	client := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true, TLSClientConfig: tlsConfig}}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	return resp.StatusCode, body, nil
}

// DialAddr turns a listen address into one to connect to: an empty or
// unspecified host becomes 127.0.0.1 (::1 for "[::]").
func DialAddr(addr string) (string, error) {
	if addr == "" || addr == "off" {
		return "", errors.New("healthcheck: no probe address (the process serves no /readyz: its health listener is off)")
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("healthcheck: address %q: %w", addr, err)
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return net.JoinHostPort(host, port), nil
}

// Main runs `<binary> healthcheck [--addr ADDR]` with args (those after
// "healthcheck") and returns the exit code: 0 ready, 1 not ready, 2 bad
// usage. The default address is def: the address the process listens on,
// its flag's value from the environment or its default (proc.Builtins).
func Main(ctx context.Context, binary string, args []string, def string, stderr io.Writer) int {
	fs := pflag.NewFlagSet(binary+" healthcheck", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", def, "the /readyz listen address to probe")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := Probe(ctx, *addr); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", binary, err)
		return 1
	}
	return 0
}

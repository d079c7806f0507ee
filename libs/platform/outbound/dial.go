package outbound

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"syscall"
	"time"
)

// Resolver resolves names to addresses; *net.Resolver is one. Tests inject
// their own to show what happens when a name resolves to a refused address.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Dialer connects only to addresses its Policy allows.
type Dialer struct {
	// Policy is the address rule.
	Policy Policy
	// Resolver resolves names (net.DefaultResolver when nil).
	Resolver Resolver
	// Timeout bounds one connection attempt (10 s when zero).
	Timeout time.Duration
}

// DialContext resolves address's host, refuses it when every address it
// names is refused, and connects to the first allowed one that answers. The
// socket's address is checked once more just before connecting.
func (d *Dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", address, err)
	}
	var addrs []netip.Addr
	if a, ok := ParseHost(host); ok {
		addrs = []netip.Addr{a}
	} else {
		r := d.Resolver
		if r == nil {
			r = net.DefaultResolver
		}
		if addrs, err = r.LookupNetIP(ctx, "ip", host); err != nil {
			return nil, fmt.Errorf("resolve %s: %w", host, err)
		}
		if len(addrs) == 0 {
			return nil, fmt.Errorf("resolve %s: no addresses", host)
		}
	}
	timeout := d.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	nd := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second, Control: d.control}
	var errs []error
	for _, a := range addrs {
		if err := d.Policy.CheckAddr(host, a); err != nil {
			errs = append(errs, err)
			continue
		}
		conn, err := nd.DialContext(ctx, network, net.JoinHostPort(a.WithZone("").String(), port))
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("dial %s: %w", address, errors.Join(errs...))
}

// control checks the address a socket is about to connect to.
func (d *Dialer) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("outbound: unexpected socket address %q: %w", address, err)
	}
	return d.Policy.CheckAddr("", ap.Addr())
}

// NewTransport returns an HTTP transport that dials through d, trusts tlsConf
// (nil for the system's roots, TLS 1.2 at least) and uses no proxy.
func NewTransport(d *Dialer, tlsConf *tls.Config) *http.Transport {
	if tlsConf == nil {
		tlsConf = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, address string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, address)
			if err != nil {
				return nil, err
			}
			return &clientFirst{Conn: c, wrote: make(chan struct{})}, nil
		},
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   128,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		TLSClientConfig:       tlsConf,
	}
}

// clientFirst is a connection on which nothing is read before the client
// has written: HTTP servers never speak first, but a peer that is not HTTP
// does (a NATS port sends its INFO line at once, a database its greeting).
// Held back, its bytes are read as the answer to the request, which the
// transport refuses as malformed (and TransportError sums up) instead of
// logging them as an "unsolicited response" on the process's log.
type clientFirst struct {
	net.Conn
	wrote chan struct{}
	once  sync.Once
}

func (c *clientFirst) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.once.Do(func() { close(c.wrote) })
	return n, err
}

func (c *clientFirst) Read(p []byte) (int, error) {
	<-c.wrote
	return c.Conn.Read(p)
}

func (c *clientFirst) Close() error {
	c.once.Do(func() { close(c.wrote) })
	return c.Conn.Close()
}

// NewClient returns a client over t that does not follow redirects: a 3xx
// answer is returned as it is.
func NewClient(t http.RoundTripper) *http.Client {
	return &http.Client{
		Transport:     t,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

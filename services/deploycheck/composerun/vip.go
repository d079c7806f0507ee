package composerun

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// VIP is a host that runs no process: a Kubernetes Service's virtual
// address, on the bridge like every host, named Name (and Aliases in every
// hosts file). Each of its ports forwards a connection to the next ready
// backend, round robin, as kube-proxy does: a backend is ready while its
// process runs and, when it has a health check, the check passes.
type VIP struct {
	Name    string
	Aliases []string
	Ports   []VIPPort
}

// VIPPort is one port of a VIP and, for each service behind it, the port
// it forwards to there.
type VIPPort struct {
	Port    int
	Targets []VIPTarget
}

// VIPTarget is one backend of a VIP's port.
type VIPTarget struct {
	Service string
	Port    int
}

// serveVIPs listens on every VIP's ports, in its namespace.
func (r *Run) serveVIPs() error {
	for _, v := range r.cfg.VIPs {
		h := r.net.hosts[v.Name]
		for _, p := range v.Ports {
			for _, t := range p.Targets {
				if _, ok := r.procs[t.Service]; !ok {
					return fmt.Errorf("VIP %s port %d: no service %s behind it", v.Name, p.Port, t.Service)
				}
			}
			var l net.Listener
			err := inNetns(h.netns, func() error {
				var err error
				l, err = net.Listen("tcp", net.JoinHostPort(h.addr.String(), strconv.Itoa(p.Port)))
				return err
			})
			if err != nil {
				return fmt.Errorf("VIP %s: listen %d: %w", v.Name, p.Port, err)
			}
			r.proxies = append(r.proxies, l)
			r.logf("VIP %s %s:%d -> %v", v.Name, h.addr, p.Port, p.Targets)
			r.wg.Add(1)
			go func() {
				defer r.wg.Done()
				r.balance(l, h.netns, p.Targets)
			}()
		}
	}
	return nil
}

// balance accepts connections on l and forwards each to the next ready
// target, dialled from the VIP's namespace; with none ready the
// connection is closed, as a Service without endpoints refuses it.
func (r *Run) balance(l net.Listener, netns string, targets []VIPTarget) {
	var next atomic.Uint64
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		var target string
		for range targets {
			t := targets[next.Add(1)%uint64(len(targets))]
			if r.procs[t.Service].ready() {
				target = net.JoinHostPort(r.Addr(t.Service), strconv.Itoa(t.Port))
				break
			}
		}
		if target == "" {
			_ = c.Close()
			continue
		}
		go r.pipe(c, func() (net.Conn, error) {
			var up net.Conn
			err := inNetns(netns, func() error {
				var err error
				up, err = net.DialTimeout("tcp", target, 10*time.Second)
				return err
			})
			return up, err
		})
	}
}

// httpCheck runs an HTTP health check of service from its namespace.
func (r *Run) httpCheck(ctx context.Context, service string, h *HTTPGet) error {
	h0 := r.net.hosts[service]
	scheme := "http"
	if strings.EqualFold(h.Scheme, "HTTPS") {
		scheme = "https"
	}
	url := fmt.Sprintf("%s://%s%s", scheme, net.JoinHostPort(h0.addr.String(), strconv.Itoa(h.Port)), h.Path)
	tr := &http.Transport{
		Proxy:             nil,
		DisableKeepAlives: true,
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a kubelet's probe does not check the certificate
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var c net.Conn
			err := inNetns(h0.netns, func() error {
				var err error
				c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
				return err
			})
			return c, err
		},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

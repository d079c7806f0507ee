package kuberun

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// Wiring checks, without running anything, that the topology's pods can
// reach what they name: every Service picks at least one pod and each of
// its ports forwards to a port every such pod names; every address in a
// pod's environment or arguments (host:port, or a URL) whose host is a
// Service of the stream (its short name, NAME.NS or the full name), or a
// name in the pod's own namespace, names a Service that exists and one of
// its ports. Names in other namespaces (an external database, an external
// NATS) are the cluster's, not the stream's, and are left alone.
func (t *Topology) Wiring() error {
	var errs []error
	services := map[string]*Service{} // by every DNS name, qualified by namespace
	for _, s := range t.Services {
		services[s.Namespace+"/"+s.Name] = s
		if len(s.Pods) == 0 {
			errs = append(errs, fmt.Errorf("Service %s: its selector %v picks no pod", s.Name, s.Selector))
			continue
		}
		for _, sp := range s.Ports {
			for _, p := range s.Pods {
				if port := s.TargetPort(sp, p); port == 0 || !declares(p, port) {
					errs = append(errs, fmt.Errorf("Service %s port %d: targetPort %s is no port of pod %s", s.Name, sp.Port, sp.Target, p.Name))
				}
			}
		}
	}
	for _, p := range t.Pods {
		values := map[string]string{}
		for _, e := range p.Env {
			values["env "+e.Name] = e.Value
		}
		for i, a := range p.Argv {
			values[fmt.Sprintf("argument %d", i)] = a
		}
		for where, v := range values {
			for _, addr := range addresses(v) {
				if err := t.reaches(services, p, addr); err != nil {
					errs = append(errs, fmt.Errorf("pod %s: %s: %w", p.Name, where, err))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// declares reports whether the pod's container names port among its
// ports (a Service may forward to a port a container does not declare,
// but every port of this chart's is declared, so one that is not is a
// mistake).
func declares(p *Pod, port int) bool {
	for _, n := range p.Ports {
		if n == port {
			return true
		}
	}
	return false
}

type address struct {
	host string
	port int
}

var hostPort = regexp.MustCompile(`^([a-z0-9]([-a-z0-9.]*[a-z0-9])?):([0-9]{1,5})$`)

// addresses are the host:port pairs a value names: the value itself, or
// the host of a URL (its scheme's port when it has none); lists separated
// by commas are split.
func addresses(v string) []address {
	var out []address
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		if m := hostPort.FindStringSubmatch(part); m != nil {
			port, _ := strconv.Atoi(m[3])
			out = append(out, address{m[1], port})
			continue
		}
		u, err := url.Parse(part)
		if err != nil || u.Host == "" || u.Scheme == "" {
			continue
		}
		port, err := strconv.Atoi(u.Port())
		if err != nil {
			port = map[string]int{"http": 80, "https": 443, "nats": 4222, "tls": 4222, "postgres": 5432, "postgresql": 5432}[u.Scheme]
		}
		if port != 0 {
			out = append(out, address{u.Hostname(), port})
		}
	}
	return out
}

// reaches checks one address a pod names.
func (t *Topology) reaches(services map[string]*Service, p *Pod, a address) error {
	if ip := net.ParseIP(a.host); ip != nil || a.host == "localhost" {
		return nil // a listen address, or the pod itself
	}
	name, ns := a.host, p.Namespace
	labels := strings.Split(a.host, ".")
	switch {
	case len(labels) == 1:
	case len(labels) == 2 || (len(labels) == 3 && labels[2] == "svc") || (len(labels) == 5 && strings.HasSuffix(a.host, ".svc.cluster.local")):
		name, ns = labels[0], labels[1]
	default:
		return nil // not a cluster name
	}
	s, ok := services[ns+"/"+name]
	if !ok {
		if ns != p.Namespace {
			return nil // another namespace's: outside the stream
		}
		return fmt.Errorf("%s:%d: no Service %s in namespace %s", a.host, a.port, name, ns)
	}
	for _, sp := range s.Ports {
		if sp.Port == a.port {
			return nil
		}
	}
	return fmt.Errorf("%s:%d: Service %s has no port %d", a.host, a.port, name, a.port)
}

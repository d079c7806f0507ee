package composerun

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// File is the part of a normalised Compose file (`docker-compose config`'s
// output) that the runner honours.
type File struct {
	Services map[string]*Service `yaml:"services"`
	Volumes  map[string]any      `yaml:"volumes"`
}

// Service is one Compose service, as `docker-compose config` normalises it.
type Service struct {
	Name        string                `yaml:"-"`
	Image       string                `yaml:"image"`
	Command     []string              `yaml:"command"`
	Entrypoint  []string              `yaml:"entrypoint"`
	Environment map[string]string     `yaml:"environment"`
	Healthcheck *Healthcheck          `yaml:"healthcheck"`
	DependsOn   map[string]Dependency `yaml:"depends_on"`
	Restart     string                `yaml:"restart"`
	Ports       []Port                `yaml:"ports"`
	Volumes     []string              `yaml:"volumes"`
	User        string                `yaml:"user"`
}

// Healthcheck is a service's health check.
type Healthcheck struct {
	Test        []string `yaml:"test"`
	Interval    string   `yaml:"interval"`
	Timeout     string   `yaml:"timeout"`
	Retries     int      `yaml:"retries"`
	StartPeriod string   `yaml:"start_period"`
	Disable     bool     `yaml:"disable"`
	// HTTPGet, when set, is the check instead of Test (no Compose file
	// says it: the Kubernetes runner's httpGet probes).
	HTTPGet *HTTPGet `yaml:"-"`
}

// HTTPGet is an HTTP health check: GET Path on Port of the service's own
// address, from its namespace, over Scheme (HTTP, or HTTPS with the
// certificate unchecked, as a kubelet does); 200 to 399 pass.
type HTTPGet struct {
	Path, Scheme string
	Port         int
}

// Dependency is one depends_on entry.
type Dependency struct {
	Condition string `yaml:"condition"`
}

// The depends_on conditions.
const (
	ConditionStarted   = "service_started"
	ConditionHealthy   = "service_healthy"
	ConditionCompleted = "service_completed_successfully"
)

// Port is a published port (the long syntax the normaliser writes).
type Port struct {
	Published int    `yaml:"published"`
	Target    int    `yaml:"target"`
	Protocol  string `yaml:"protocol"`
}

// Mount is one entry of a service's volumes: a named volume or a bind
// mount (Source an absolute host path), mounted at Target.
type Mount struct {
	Source, Target  string
	Named, ReadOnly bool
}

// Mounts parses the service's volumes ("source:target[:mode]").
func (s *Service) Mounts() ([]Mount, error) {
	var out []Mount
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) < 2 || len(parts) > 3 {
			return nil, fmt.Errorf("service %s: volume %q: want source:target[:mode]", s.Name, v)
		}
		m := Mount{Source: parts[0], Target: parts[1], Named: !strings.HasPrefix(parts[0], "/")}
		if len(parts) == 3 {
			m.ReadOnly = slices.Contains(strings.Split(parts[2], ","), "ro")
		}
		out = append(out, m)
	}
	return out, nil
}

// Normalise runs `docker-compose -f file --project-directory dir config`
// (Debian's docker-compose validates the file and writes it out with every
// default and anchor resolved, relative paths made absolute from dir) with
// env added to the environment, and returns its output.
func Normalise(ctx context.Context, file, dir string, env ...string) ([]byte, error) {
	if _, err := exec.LookPath("docker-compose"); err != nil {
		return nil, fmt.Errorf("docker-compose is not installed (apt-get install docker-compose): %w", err)
	}
	cmd := exec.CommandContext(ctx, "docker-compose", "-f", file, "--project-directory", dir, "config")
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("docker-compose -f %s config: %w: %s", file, err, stderr.String())
	}
	return out, nil
}

// Parse reads a normalised Compose file.
func Parse(data []byte) (*File, error) {
	var f File
	if err := yaml.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("compose file: %w", err)
	}
	if len(f.Services) == 0 {
		return nil, fmt.Errorf("compose file: no services")
	}
	for name, s := range f.Services {
		s.Name = name
		for dep, d := range s.DependsOn {
			if _, ok := f.Services[dep]; !ok {
				return nil, fmt.Errorf("service %s depends on %s, which is not in the file", name, dep)
			}
			switch d.Condition {
			case ConditionStarted, ConditionHealthy, ConditionCompleted:
			default:
				return nil, fmt.Errorf("service %s: depends_on %s: unknown condition %q", name, dep, d.Condition)
			}
			if d.Condition == ConditionHealthy && (f.Services[dep].Healthcheck == nil || f.Services[dep].Healthcheck.Disable) {
				return nil, fmt.Errorf("service %s waits for %s to be healthy, which has no healthcheck", name, dep)
			}
		}
		if h := s.Healthcheck; h != nil && !h.Disable {
			if len(h.Test) < 2 || (h.Test[0] != "CMD" && h.Test[0] != "CMD-SHELL") {
				return nil, fmt.Errorf("service %s: healthcheck test %q: want [CMD, ...]", name, h.Test)
			}
			if h.Test[0] == "CMD-SHELL" {
				return nil, fmt.Errorf("service %s: healthcheck CMD-SHELL needs a shell, which the image does not have", name)
			}
		}
		switch s.Restart {
		case "", "no", "always", "unless-stopped", "on-failure":
		default:
			if !strings.HasPrefix(s.Restart, "on-failure:") {
				return nil, fmt.Errorf("service %s: unknown restart policy %q", name, s.Restart)
			}
		}
		if _, err := s.Mounts(); err != nil {
			return nil, err
		}
	}
	return &f, nil
}

// Order returns the services in an order that starts each after what it
// depends on (by name within a level), or an error naming a cycle.
func (f *File) Order() ([]string, error) {
	done := map[string]bool{}
	var out []string
	for len(out) < len(f.Services) {
		var level []string
		for name, s := range f.Services {
			if done[name] {
				continue
			}
			ready := true
			for dep := range s.DependsOn {
				ready = ready && done[dep]
			}
			if ready {
				level = append(level, name)
			}
		}
		if len(level) == 0 {
			return nil, fmt.Errorf("depends_on has a cycle among the services not yet ordered (started: %v)", out)
		}
		sort.Strings(level)
		for _, n := range level {
			done[n] = true
		}
		out = append(out, level...)
	}
	return out, nil
}

// PublishedTo returns the service publishing host port p and its target.
func (f *File) PublishedTo(p int) (string, int, bool) {
	for name, s := range f.Services {
		for _, port := range s.Ports {
			if port.Published == p {
				return name, port.Target, true
			}
		}
	}
	return "", 0, false
}

// restarts reports whether the policy restarts a process that exited with
// code.
func restarts(policy string, code int) bool {
	switch {
	case policy == "always" || policy == "unless-stopped":
		return true
	case strings.HasPrefix(policy, "on-failure"):
		return code != 0
	}
	return false
}

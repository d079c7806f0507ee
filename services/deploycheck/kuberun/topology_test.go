package kuberun

import (
	"os"
	"slices"
	"strings"
	"testing"
)

func readFixture(t *testing.T) *Topology {
	t.Helper()
	data, err := os.ReadFile("testdata/topology.yaml")
	if err != nil {
		t.Fatal(err)
	}
	top, err := Read(data, "prod")
	if err != nil {
		t.Fatal(err)
	}
	return top
}

// TestReadResolvesPods: replicas become pods named by index after the hook
// Job; the environment is resolved as a kubelet resolves it (values,
// Secret and ConfigMap keys, the downward API, $(VAR) of earlier
// variables only, $$ escaping), the container's user over the pod's, the
// volumes' files and modes, and probes on named ports.
func TestReadResolvesPods(t *testing.T) {
	top := readFixture(t)
	var names []string
	for _, p := range top.Pods {
		names = append(names, p.Name)
	}
	if want := []string{"migrate", "api-0", "api-1"}; !slices.Equal(names, want) {
		t.Fatalf("pods %v, want %v (the hook Job first)", names, want)
	}
	job := top.Pods[0]
	if !job.Job || !job.Hook || !slices.Equal(job.Argv, []string{"no8s-store", "migrate"}) {
		t.Errorf("the Job's pod: %+v", job)
	}
	api := top.Pods[2]
	env := map[string]string{}
	for _, e := range api.Env {
		env[e.Name] = e.Value
	}
	for k, want := range map[string]string{
		"PORT": "8000", "PASSWORD": "secret", "LEVEL": "debug", "POD": "api-1", "NS": "prod",
		// USER_NAME comes after URL: its reference stays as written.
		"URL": "postgres://$(USER_NAME):secret@db:5432/app", "USER_NAME": "app",
	} {
		if env[k] != want {
			t.Errorf("env %s = %q, want %q", k, env[k], want)
		}
	}
	if want := []string{"no8s-gateway", "--listen=0.0.0.0:8000", "$(KEPT)", "$(UNKNOWN)"}; !slices.Equal(api.Argv, want) {
		t.Errorf("argv %q, want %q", api.Argv, want)
	}
	if api.UID == nil || *api.UID != 1000 || api.GID == nil || *api.GID != 65532 || api.FSGroup == nil || *api.FSGroup != 65532 {
		t.Errorf("user %v group %v fsGroup %v, want 1000 (the container's), 65532, 65532", api.UID, api.GID, api.FSGroup)
	}
	if r := api.Readiness; r == nil || r.HTTPPath != "/readyz" || r.Port != 8000 || r.Scheme != "HTTP" || r.Period != 5 || r.Timeout != 1 || r.Failures != 3 {
		t.Errorf("readiness %+v", r)
	}
	if l := api.Liveness; l == nil || !slices.Equal(l.Exec, []string{"no8s-gateway", "healthcheck"}) {
		t.Errorf("liveness %+v", l)
	}
	mounts := map[string]Mount{}
	for _, m := range api.Mounts {
		mounts[m.Path] = m
	}
	if m := mounts["/var/lib/creds"]; !m.ReadOnly || len(m.Files) != 1 || m.Files[0].Path != "db/password" || string(m.Files[0].Data) != "secret" || m.Files[0].Mode != 0o440 {
		t.Errorf("secret volume %+v", m)
	}
	var conf []string
	for _, f := range mounts["/etc/app"].Files {
		conf = append(conf, f.Path+"="+string(f.Data))
	}
	if want := []string{`grants.json={"grants":[]}`, "level=debug", "user=app"}; !slices.Equal(conf, want) {
		t.Errorf("projected volume %v, want %v", conf, want)
	}
	if m := mounts["/tmp"]; len(m.Files) != 0 || m.Persistent {
		t.Errorf("emptyDir %+v", m)
	}
}

// TestReadResolvesServices: a Service's DNS names, its pods by selector in
// its namespace, its target ports by name or number; a selector that
// matches nothing leaves it without pods.
func TestReadResolvesServices(t *testing.T) {
	top := readFixture(t)
	if len(top.Services) != 2 {
		t.Fatalf("%d services, want 2", len(top.Services))
	}
	api, nobody := top.Services[0], top.Services[1]
	if want := []string{"api", "api.prod", "api.prod.svc.cluster.local"}; !slices.Equal(api.DNSNames(), want) {
		t.Errorf("DNS names %v, want %v", api.DNSNames(), want)
	}
	if len(api.Pods) != 2 || api.Pods[0].Name != "api-0" || api.Pods[1].Name != "api-1" {
		t.Errorf("pods of api: %v", api.Pods)
	}
	if got := api.TargetPort(api.Ports[0], api.Pods[0]); got != 8000 {
		t.Errorf("port 80 → %d, want 8000 (targetPort http)", got)
	}
	if got := api.TargetPort(api.Ports[1], api.Pods[0]); got != 9001 {
		t.Errorf("port 9000 → %d, want 9001", got)
	}
	if len(nobody.Pods) != 0 {
		t.Errorf("a selector matching nothing picked %v", nobody.Pods)
	}
	wrong := ServicePort{Port: 80, Target: intOrStr{Name: "htp"}}
	if got := api.TargetPort(wrong, api.Pods[0]); got != 0 {
		t.Errorf("a targetPort no container names → %d, want 0 (no endpoint)", got)
	}
}

// TestReadRefusals: what a kubelet or the API would refuse is an error
// naming the object, the pod and the reference.
func TestReadRefusals(t *testing.T) {
	base, err := os.ReadFile("testdata/topology.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct{ old, new, want string }{
		"missing secret key":     {"key: password}}}", "key: pasword}}}", `pod api-0: env PASSWORD: Secret "db" has no key "pasword"`},
		"missing configmap":      {"configMapKeyRef: {name: config,", "configMapKeyRef: {name: konfig,", `env LEVEL: ConfigMap "konfig" not found`},
		"missing volume secret":  {"secretName: db", "secretName: dbs", `volume creds: Secret "dbs" not found`},
		"item outside volume":    {"path: db/password", "path: ../password", `item path "../password" is not a relative path`},
		"probe on unnamed port":  {"port: http}\n            periodSeconds", "port: htp}\n            periodSeconds", `probe on port "htp"`},
		"mount of no volume":     {"{name: tmp, mountPath: /tmp}", "{name: temp, mountPath: /tmp}", "volume mount temp: no volume of that name"},
		"selector not matching":  {"matchLabels: {app: api}", "matchLabels: {app: apo}", "does not match its pod template's labels"},
		"unknown kind":           {"kind: ServiceAccount", "kind: Ingress", "kind Ingress is not one the runner runs"},
		"malformed secret data":  {"password: c2VjcmV0", "password: '%%%'", "Secret/db (line"},
		"unsupported field path": {"fieldPath: metadata.name}", "fieldPath: status.podIP}", "env POD: valueFrom: only"},
	} {
		t.Run(name, func(t *testing.T) {
			if !strings.Contains(string(base), c.old) {
				t.Fatalf("the fixture holds no %q", c.old)
			}
			_, err := Read([]byte(strings.Replace(string(base), c.old, c.new, 1)), "prod")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Read: %v; want an error containing %q", err, c.want)
			}
		})
	}
}

// TestWiring: a Service that picks no pod, an address naming a Service the
// stream lacks in the pod's namespace, a Service port it does not have and
// a targetPort no pod names are each reported; addresses of other
// namespaces and listen addresses are left alone.
func TestWiring(t *testing.T) {
	err := readFixture(t).Wiring()
	for _, want := range []string{
		"Service nobody: its selector map[app:nothing] picks no pod",
		"pod api-0: env URL: db:5432: no Service db in namespace prod",
		"Service api port 9000: targetPort 9001 is no port of pod api-0",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Wiring: %v\nwant it to contain %q", err, want)
		}
	}
	for _, c := range []struct {
		value string
		ok    bool
	}{
		{"api:80", true}, {"api.prod:80", true}, {"api.prod:9000", false}, {"http://api.prod.svc.cluster.local", true}, {"https://api.prod.svc:80/x", true},
		{"api:8080", false}, {"nats://queue:4222", false},
		{"postgres://u:p@db.databases.svc.cluster.local:5432/x", true}, {"0.0.0.0:8000", true}, {"localhost:1", true}, {"A/v1,B/v1", true},
	} {
		top := readFixture(t)
		p := top.Pods[1]
		p.Env = []EnvVar{{Name: "X", Value: c.value}}
		top.Pods = []*Pod{p}
		top.Services = top.Services[:1]
		top.Services[0].Ports = top.Services[0].Ports[:1]
		if err := top.Wiring(); (err == nil) != c.ok {
			t.Errorf("%q: %v, want ok %v", c.value, err, c.ok)
		}
	}
}

package kuberun

import (
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/no8s/no8s/services/internal/manifest"
)

// Topology is what the rendered objects run: their pods, in the order the
// runner starts them (hook Jobs first), and their Services.
type Topology struct {
	Pods     []*Pod
	Services []*Service
}

// Pod is one pod of a workload, resolved as a kubelet would start it.
type Pod struct {
	// Name is the workload's name and the replica's index
	// (no8s-store-0): stable, unlike a ReplicaSet's random suffix.
	Name, Namespace string
	// Owner is the workload: "Deployment/no8s-store".
	Owner  string
	Labels map[string]string
	// Job is set for a Job's pod: it runs to completion (restarted on
	// failure). Hook is set for a Job that is a pre-install or pre-upgrade
	// hook: every other pod starts after it succeeded.
	Job, Hook bool
	// Image is the container's image; Argv its command and arguments
	// ($(VAR) expanded); an empty Argv is the image's default.
	Image string
	Argv  []string
	// Env is the container's environment, resolved, in order.
	Env []EnvVar
	// UID and GID are the container's user and group (its own security
	// context over the pod's); nil: the image's. FSGroup owns its volumes.
	UID, GID, FSGroup *int64
	// Ports are the container's named ports.
	Ports map[string]int
	// Mounts are its volumes, where they are mounted.
	Mounts []Mount
	// Startup, Liveness and Readiness are its probes (nil: none).
	Startup, Liveness, Readiness *Probe
}

// EnvVar is one resolved environment variable.
type EnvVar struct{ Name, Value string }

// Mount is one volume mounted in the container: the files of a Secret,
// ConfigMap or projected volume (path relative to the mount, data, mode),
// or an empty directory (an emptyDir, a volume claim).
type Mount struct {
	Volume, Path string
	ReadOnly     bool
	Files        []File
	// Persistent is set for a volume claim (a StatefulSet's
	// volumeClaimTemplates): its contents outlive the pod.
	Persistent bool
}

// File is one file of a volume.
type File struct {
	Path string
	Data []byte
	Mode uint32
}

// Probe is a resolved probe: an HTTP GET on the pod's port, or a command.
type Probe struct {
	HTTPPath, Scheme string
	Port             int
	Exec             []string
	// Delay, Period, Timeout in seconds, and the failures in a row that
	// make it fail (the API's defaults where the object says nothing).
	Delay, Period, Timeout, Failures int
}

// Service is one Service: its DNS names, its ports and the pods its
// selector picks.
type Service struct {
	Name, Namespace string
	Selector        map[string]string
	Ports           []ServicePort
	// Pods are the pods the selector picks (none: no endpoints, as the
	// API would leave it).
	Pods []*Pod
}

// ServicePort is one port of a Service and what it forwards to.
type ServicePort struct {
	Name string
	Port int
	// Target is the targetPort: a number, or the name of a container port.
	Target intOrStr
}

// DNSNames are the names a pod resolves the Service by: NAME (in its own
// namespace), NAME.NS and NAME.NS.svc.cluster.local.
func (s *Service) DNSNames() []string {
	return []string{s.Name, s.Name + "." + s.Namespace, s.Name + "." + s.Namespace + ".svc.cluster.local"}
}

// TargetPort is the port of pod p that the Service's port forwards to: the
// targetPort's number, or the container port of that name; 0 when the pod
// names no such port (the API's endpoints would leave the pod out).
func (s *Service) TargetPort(sp ServicePort, p *Pod) int {
	if sp.Target.Name != "" {
		return p.Ports[sp.Target.Name]
	}
	if sp.Target.Num != 0 {
		return sp.Target.Num
	}
	return sp.Port
}

// Documents joins YAML streams into one (each ends before the next's
// separator), empty ones left out: the objects a cluster already has, then
// a release's.
func Documents(streams ...[]byte) []byte {
	var out []byte
	for _, s := range streams {
		if len(s) == 0 {
			continue
		}
		if len(out) > 0 {
			out = append(out, "\n---\n"...)
		}
		out = append(out, s...)
	}
	return out
}

// Read reads a rendered stream (helm template's output) into its
// topology; ns is the namespace of objects that name none (helm template
// --namespace). Unknown kinds are refused; ServiceAccounts and
// PodDisruptionBudgets are read and run nothing.
func Read(stream []byte, ns string) (*Topology, error) {
	var (
		workloads  []*workload
		services   []*service
		configMaps = map[string]map[string][]byte{}
		secrets    = map[string]map[string][]byte{}
	)
	for _, c := range manifest.Split(stream) {
		var o object
		if err := yaml.Unmarshal(c.Data, &o); err != nil {
			return nil, fmt.Errorf("document at line %d: %w", c.Line, err)
		}
		if o.Kind == "" && o.APIVersion == "" {
			continue // an empty document or comments only
		}
		if o.Metadata.Name == "" {
			return nil, fmt.Errorf("document at line %d: %s without metadata.name", c.Line, o.Kind)
		}
		if o.Metadata.Namespace == "" {
			o.Metadata.Namespace = ns
		}
		key := o.Metadata.Namespace + "/" + o.Metadata.Name
		var err error
		switch o.Kind {
		case "Deployment", "StatefulSet", "Job":
			w := &workload{}
			if err = yaml.Unmarshal(c.Data, w); err == nil {
				w.Metadata.Namespace = o.Metadata.Namespace
				workloads = append(workloads, w)
			}
		case "Service":
			s := &service{}
			if err = yaml.Unmarshal(c.Data, s); err == nil {
				s.Metadata.Namespace = o.Metadata.Namespace
				services = append(services, s)
			}
		case "ConfigMap":
			var cm configMap
			if err = yaml.Unmarshal(c.Data, &cm); err == nil {
				configMaps[key] = map[string][]byte{}
				for k, v := range cm.Data {
					configMaps[key][k] = []byte(v)
				}
			}
		case "Secret":
			var s secret
			if err = yaml.Unmarshal(c.Data, &s); err == nil {
				secrets[key], err = secretData(s)
			}
		case "ServiceAccount", "PodDisruptionBudget":
		default:
			return nil, fmt.Errorf("%s/%s (line %d): kind %s is not one the runner runs", o.Kind, o.Metadata.Name, c.Line, o.Kind)
		}
		if err != nil {
			return nil, fmt.Errorf("%s/%s (line %d): %w", o.Kind, o.Metadata.Name, c.Line, err)
		}
	}
	t := &Topology{}
	refs := refs{configMaps: configMaps, secrets: secrets}
	for _, w := range workloads {
		pods, err := w.pods(refs)
		if err != nil {
			return nil, err
		}
		t.Pods = append(t.Pods, pods...)
	}
	// Hook Jobs first, as Helm runs them before the release's objects.
	slices.SortStableFunc(t.Pods, func(a, b *Pod) int {
		switch {
		case a.Hook && !b.Hook:
			return -1
		case b.Hook && !a.Hook:
			return 1
		}
		return 0
	})
	for _, s := range services {
		t.Services = append(t.Services, s.resolve(t.Pods))
	}
	return t, nil
}

func secretData(s secret) (map[string][]byte, error) {
	out := map[string][]byte{}
	for k, v := range s.Data {
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			return nil, fmt.Errorf("data %s: %w", k, err)
		}
		out[k] = b
	}
	for k, v := range s.StringData {
		out[k] = []byte(v)
	}
	return out, nil
}

// refs are the ConfigMaps and Secrets by namespace/name.
type refs struct {
	configMaps, secrets map[string]map[string][]byte
}

// object is the data of the Secret or ConfigMap (kind) ns/name.
func (r refs) object(kind, ns, name string) (map[string][]byte, error) {
	src := r.secrets
	if kind == "ConfigMap" {
		src = r.configMaps
	}
	data, ok := src[ns+"/"+name]
	if !ok {
		return nil, fmt.Errorf("%s %q not found", kind, name)
	}
	return data, nil
}

// lookup is one key of the Secret or ConfigMap (kind) ns/name.
func (r refs) lookup(kind, ns, name, key string) ([]byte, error) {
	data, err := r.object(kind, ns, name)
	if err != nil {
		return nil, err
	}
	v, ok := data[key]
	if !ok {
		return nil, fmt.Errorf("%s %q has no key %q", kind, name, key)
	}
	return v, nil
}

// pods are the workload's pods: replicas of a Deployment or StatefulSet
// (1 when unset), one for a Job.
func (w *workload) pods(r refs) ([]*Pod, error) {
	n := 1
	if w.Kind != "Job" && w.Spec.Replicas != nil {
		n = *w.Spec.Replicas
	}
	spec := w.Spec.Template.Spec
	owner := w.Kind + "/" + w.Metadata.Name
	switch {
	case len(spec.Containers) != 1:
		return nil, fmt.Errorf("%s: %d containers: the runner runs pods of one container", owner, len(spec.Containers))
	case len(spec.InitContainers) > 0:
		return nil, fmt.Errorf("%s: init containers are not run here", owner)
	}
	if sel := w.Spec.Selector.MatchLabels; w.Kind != "Job" && !matches(sel, w.Spec.Template.Metadata.Labels) {
		return nil, fmt.Errorf("%s: selector %v does not match its pod template's labels %v (the API refuses it)", owner, sel, w.Spec.Template.Metadata.Labels)
	}
	hooks := strings.Split(w.Metadata.Annotations["helm.sh/hook"], ",")
	var pods []*Pod
	for i := range n {
		p := &Pod{
			Name: w.Metadata.Name, Namespace: w.Metadata.Namespace, Owner: owner,
			Labels: w.Spec.Template.Metadata.Labels, Job: w.Kind == "Job",
			Hook: w.Kind == "Job" && (slices.Contains(hooks, "pre-install") || slices.Contains(hooks, "pre-upgrade")),
		}
		if w.Kind != "Job" {
			p.Name = fmt.Sprintf("%s-%d", w.Metadata.Name, i)
		}
		if err := p.resolve(spec, r, w.claims()); err != nil {
			return nil, fmt.Errorf("%s: pod %s: %w", owner, p.Name, err)
		}
		pods = append(pods, p)
	}
	return pods, nil
}

// claims are the names of a StatefulSet's volume claim templates.
func (w *workload) claims() map[string]bool {
	out := map[string]bool{}
	for _, c := range w.Spec.VolumeClaimTemplates {
		out[c.Metadata.Name] = true
	}
	return out
}

// matches reports whether labels hold every pair of the selector (an
// empty selector matches nothing, as for a Service it selects no pods).
func matches(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// resolve fills the pod from its spec as a kubelet would: a reference that
// does not resolve fails (the kubelet's CreateContainerConfigError).
func (p *Pod) resolve(spec podSpec, r refs, claims map[string]bool) error {
	c := spec.Containers[0]
	p.Image = c.Image
	p.UID, p.GID, p.FSGroup = spec.SecurityContext.RunAsUser, spec.SecurityContext.RunAsGroup, spec.SecurityContext.FSGroup
	if c.SecurityContext.RunAsUser != nil {
		p.UID = c.SecurityContext.RunAsUser
	}
	if c.SecurityContext.RunAsGroup != nil {
		p.GID = c.SecurityContext.RunAsGroup
	}
	p.Ports = map[string]int{}
	for _, port := range c.Ports {
		if port.Name != "" {
			p.Ports[port.Name] = port.ContainerPort
		}
	}
	vars := map[string]string{}
	for _, e := range c.Env {
		v := expand(e.Value, vars)
		if f := e.ValueFrom; f != nil {
			var err error
			switch {
			case f.SecretKeyRef != nil:
				v, err = p.keyRef(r, "Secret", f.SecretKeyRef)
			case f.ConfigMapKeyRef != nil:
				v, err = p.keyRef(r, "ConfigMap", f.ConfigMapKeyRef)
			case f.FieldRef != nil && f.FieldRef.FieldPath == "metadata.name":
				v = p.Name
			case f.FieldRef != nil && f.FieldRef.FieldPath == "metadata.namespace":
				v = p.Namespace
			default:
				err = errors.New("valueFrom: only secretKeyRef, configMapKeyRef and fieldRef metadata.name or metadata.namespace are resolved here")
			}
			if err != nil {
				return fmt.Errorf("env %s: %w", e.Name, err)
			}
		}
		vars[e.Name] = v
		p.Env = append(p.Env, EnvVar{Name: e.Name, Value: v})
	}
	for _, a := range append(slices.Clone(c.Command), c.Args...) {
		p.Argv = append(p.Argv, expand(a, vars))
	}
	var err error
	for _, pr := range []struct {
		in  *probe
		out **Probe
	}{{c.StartupProbe, &p.Startup}, {c.LivenessProbe, &p.Liveness}, {c.ReadinessProbe, &p.Readiness}} {
		if *pr.out, err = p.probe(pr.in); err != nil {
			return err
		}
	}
	volumes := map[string]volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	for _, m := range c.VolumeMounts {
		mount := Mount{Volume: m.Name, Path: m.MountPath, ReadOnly: m.ReadOnly}
		v, ok := volumes[m.Name]
		switch {
		case !ok && claims[m.Name]:
			mount.Persistent = true
		case !ok:
			return fmt.Errorf("volume mount %s: no volume of that name", m.Name)
		default:
			if mount.Files, err = p.files(v, r); err != nil {
				return fmt.Errorf("volume %s: %w", m.Name, err)
			}
			mount.Persistent = v.PersistentVolumeClaim != nil
		}
		p.Mounts = append(p.Mounts, mount)
	}
	return nil
}

func (p *Pod) keyRef(r refs, kind string, ref *keyRef) (string, error) {
	v, err := r.lookup(kind, p.Namespace, ref.Name, ref.Key)
	if err != nil && ref.Optional {
		return "", nil
	}
	return string(v), err
}

// varRef is a $(VAR) reference; $$(VAR) escapes it.
var varRef = regexp.MustCompile(`\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// expand replaces $(VAR) by the value of a variable defined before it, as
// the kubelet does; an unknown reference stays as written.
func expand(s string, vars map[string]string) string {
	return varRef.ReplaceAllStringFunc(s, func(m string) string {
		if m == "$$" {
			return "$"
		}
		if v, ok := vars[m[2:len(m)-1]]; ok {
			return v
		}
		return m
	})
}

// probe resolves a probe: its port by number or by the container's name.
func (p *Pod) probe(in *probe) (*Probe, error) {
	if in == nil {
		return nil, nil
	}
	out := &Probe{Delay: in.InitialDelaySeconds, Period: or(in.PeriodSeconds, 10), Timeout: or(in.TimeoutSeconds, 1), Failures: or(in.FailureThreshold, 3)}
	switch {
	case in.HTTPGet != nil:
		out.HTTPPath, out.Scheme = or(in.HTTPGet.Path, "/"), or(in.HTTPGet.Scheme, "HTTP")
		out.Port = in.HTTPGet.Port.Num
		if name := in.HTTPGet.Port.Name; name != "" {
			if out.Port = p.Ports[name]; out.Port == 0 {
				return nil, fmt.Errorf("probe on port %q: the container names no such port", name)
			}
		}
	case in.Exec != nil:
		out.Exec = in.Exec.Command
	default:
		return nil, errors.New("a probe that is neither httpGet nor exec")
	}
	return out, nil
}

// or is v, or def when v is the zero value.
func or[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// files are the files a Secret, ConfigMap or projected volume holds (all
// keys, or the items named), with the volume's mode (0644 by default).
func (p *Pod) files(v volume, r refs) ([]File, error) {
	type source struct {
		kind, name string
		items      []keyToPath
	}
	var sources []source
	mode := 0o644
	switch {
	case v.Secret != nil:
		sources = append(sources, source{"Secret", v.Secret.SecretName, v.Secret.Items})
		if v.Secret.DefaultMode != nil {
			mode = *v.Secret.DefaultMode
		}
	case v.ConfigMap != nil:
		sources = append(sources, source{"ConfigMap", v.ConfigMap.Name, v.ConfigMap.Items})
		if v.ConfigMap.DefaultMode != nil {
			mode = *v.ConfigMap.DefaultMode
		}
	case v.Projected != nil:
		for _, s := range v.Projected.Sources {
			switch {
			case s.Secret != nil:
				sources = append(sources, source{"Secret", s.Secret.Name, s.Secret.Items})
			case s.ConfigMap != nil:
				sources = append(sources, source{"ConfigMap", s.ConfigMap.Name, s.ConfigMap.Items})
			default:
				return nil, errors.New("projected: only secret and configMap sources are resolved here")
			}
		}
		if v.Projected.DefaultMode != nil {
			mode = *v.Projected.DefaultMode
		}
	case v.EmptyDir != nil, v.PersistentVolumeClaim != nil:
		return nil, nil
	default:
		return nil, errors.New("only secret, configMap, projected, emptyDir and persistentVolumeClaim volumes are resolved here")
	}
	var files []File
	for _, s := range sources {
		data, err := r.object(s.kind, p.Namespace, s.name)
		if err != nil {
			return nil, err
		}
		items := s.items
		if len(items) == 0 {
			for _, k := range slices.Sorted(maps.Keys(data)) {
				items = append(items, keyToPath{Key: k, Path: k})
			}
		}
		for _, it := range items {
			d, ok := data[it.Key]
			if !ok {
				return nil, fmt.Errorf("%s %q has no key %q", s.kind, s.name, it.Key)
			}
			if clean := path.Clean(it.Path); clean != it.Path || strings.HasPrefix(clean, "..") || path.IsAbs(clean) {
				return nil, fmt.Errorf("%s %q: item path %q is not a relative path inside the volume", s.kind, s.name, it.Path)
			}
			files = append(files, File{Path: it.Path, Data: d, Mode: uint32(mode)})
		}
	}
	return files, nil
}

// resolve picks the Service's pods by its selector.
func (s *service) resolve(pods []*Pod) *Service {
	out := &Service{Name: s.Metadata.Name, Namespace: s.Metadata.Namespace, Selector: s.Spec.Selector}
	for _, sp := range s.Spec.Ports {
		out.Ports = append(out.Ports, ServicePort{Name: sp.Name, Port: sp.Port, Target: sp.TargetPort})
	}
	for _, p := range pods {
		if p.Namespace == out.Namespace && matches(s.Spec.Selector, p.Labels) {
			out.Pods = append(out.Pods, p)
		}
	}
	return out
}

package kuberun

import (
	"fmt"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// The subset of the Kubernetes API's objects that the runner reads, with
// the API's field names. Fields it does not know are ignored (they change
// nothing the runner does: resources, affinity, PodDisruptionBudgets).

type meta struct {
	Name        string            `yaml:"name"`
	Namespace   string            `yaml:"namespace"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

type object struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   meta   `yaml:"metadata"`
}

type configMap struct {
	object `yaml:",inline"`
	Data   map[string]string `yaml:"data"`
}

type secret struct {
	object `yaml:",inline"`
	Data   map[string]string `yaml:"data"` // base64, decoded by bytes

	StringData map[string]string `yaml:"stringData"`
}

type service struct {
	object `yaml:",inline"`
	Spec   struct {
		Selector map[string]string `yaml:"selector"`
		Ports    []struct {
			Name       string   `yaml:"name"`
			Port       int      `yaml:"port"`
			TargetPort intOrStr `yaml:"targetPort"`
			Protocol   string   `yaml:"protocol"`
		} `yaml:"ports"`
	} `yaml:"spec"`
}

// workload is a Deployment, StatefulSet or Job.
type workload struct {
	object `yaml:",inline"`
	Spec   struct {
		Replicas *int `yaml:"replicas"`
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Template struct {
			Metadata meta    `yaml:"metadata"`
			Spec     podSpec `yaml:"spec"`
		} `yaml:"template"`
		VolumeClaimTemplates []struct {
			Metadata meta `yaml:"metadata"`
		} `yaml:"volumeClaimTemplates"`
	} `yaml:"spec"`
}

type securityContext struct {
	RunAsUser  *int64 `yaml:"runAsUser"`
	RunAsGroup *int64 `yaml:"runAsGroup"`
	FSGroup    *int64 `yaml:"fsGroup"`
}

type podSpec struct {
	RestartPolicy   string          `yaml:"restartPolicy"`
	SecurityContext securityContext `yaml:"securityContext"`
	InitContainers  []container     `yaml:"initContainers"`
	Containers      []container     `yaml:"containers"`
	Volumes         []volume        `yaml:"volumes"`
}

type container struct {
	Name    string   `yaml:"name"`
	Image   string   `yaml:"image"`
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	Env     []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			SecretKeyRef    *keyRef `yaml:"secretKeyRef"`
			ConfigMapKeyRef *keyRef `yaml:"configMapKeyRef"`
			FieldRef        *struct {
				FieldPath string `yaml:"fieldPath"`
			} `yaml:"fieldRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	StartupProbe    *probe          `yaml:"startupProbe"`
	LivenessProbe   *probe          `yaml:"livenessProbe"`
	ReadinessProbe  *probe          `yaml:"readinessProbe"`
	SecurityContext securityContext `yaml:"securityContext"`
	VolumeMounts    []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		ReadOnly  bool   `yaml:"readOnly"`
	} `yaml:"volumeMounts"`
}

type keyRef struct {
	Name     string `yaml:"name"`
	Key      string `yaml:"key"`
	Optional bool   `yaml:"optional"`
}

type probe struct {
	HTTPGet *struct {
		Path   string   `yaml:"path"`
		Port   intOrStr `yaml:"port"`
		Scheme string   `yaml:"scheme"`
	} `yaml:"httpGet"`
	Exec *struct {
		Command []string `yaml:"command"`
	} `yaml:"exec"`
	InitialDelaySeconds int `yaml:"initialDelaySeconds"`
	PeriodSeconds       int `yaml:"periodSeconds"`
	TimeoutSeconds      int `yaml:"timeoutSeconds"`
	FailureThreshold    int `yaml:"failureThreshold"`
}

type keyToPath struct {
	Key  string `yaml:"key"`
	Path string `yaml:"path"`
}

type volume struct {
	Name   string `yaml:"name"`
	Secret *struct {
		SecretName  string      `yaml:"secretName"`
		Items       []keyToPath `yaml:"items"`
		DefaultMode *int        `yaml:"defaultMode"`
	} `yaml:"secret"`
	ConfigMap *struct {
		Name        string      `yaml:"name"`
		Items       []keyToPath `yaml:"items"`
		DefaultMode *int        `yaml:"defaultMode"`
	} `yaml:"configMap"`
	Projected *struct {
		Sources []struct {
			Secret *struct {
				Name  string      `yaml:"name"`
				Items []keyToPath `yaml:"items"`
			} `yaml:"secret"`
			ConfigMap *struct {
				Name  string      `yaml:"name"`
				Items []keyToPath `yaml:"items"`
			} `yaml:"configMap"`
		} `yaml:"sources"`
		DefaultMode *int `yaml:"defaultMode"`
	} `yaml:"projected"`
	EmptyDir              *struct{} `yaml:"emptyDir"`
	PersistentVolumeClaim *struct {
		ClaimName string `yaml:"claimName"`
	} `yaml:"persistentVolumeClaim"`
}

// intOrStr is the API's IntOrString: a port number or a port's name.
type intOrStr struct {
	Num  int
	Name string
}

// UnmarshalYAML reads a number or a name.
func (v *intOrStr) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: want a port number or name", n.Line)
	}
	if i, err := strconv.Atoi(n.Value); err == nil {
		v.Num = i
		return nil
	}
	v.Name = n.Value
	return nil
}

func (v intOrStr) String() string {
	if v.Name != "" {
		return v.Name
	}
	return strconv.Itoa(v.Num)
}

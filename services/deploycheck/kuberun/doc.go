// Package kuberun reads the objects a Helm chart renders (helm template's
// output) into what a kubelet and kube-proxy would run from them: each
// Deployment's, StatefulSet's and Job's pods, with their command and
// arguments, their environment resolved from the rendered ConfigMaps and
// Secrets (and the downward API's metadata.name and metadata.namespace,
// and $(VAR) references), their volumes' files, their user and their
// probes; and each Service with its DNS names, the pods its selector
// picks and the pod port each of its ports forwards to. What a kubelet
// would refuse (a reference to a missing Secret, ConfigMap or key, a probe
// on a port the container does not name) is an error naming the pod.
//
// Start then runs them on composerun's machinery, without a cluster: every
// pod a process in its own network namespace, every Service a virtual
// address that forwards to its ready pods; Targets points composerun's
// flow at them. The drivers are the tests behind the build tag
// deploycheck (`make deploy-check`, as root).
package kuberun

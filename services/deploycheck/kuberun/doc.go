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
// It is the first half of the runner that starts the rendered workloads in
// network namespaces (composerun's machinery); nothing here starts a
// process.
package kuberun

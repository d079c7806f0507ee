// Package kubeapi starts etcd and kube-apiserver on loopback for checks
// (the Helm chart's validation) and speaks to the API server over
// HTTP/JSON with no Kubernetes library: Start runs both processes from the
// binaries `make k8s-tools` builds, Do sends one request as a
// system:masters user, and ApplyDryRun applies a multi-document YAML stream
// with server-side apply in dry-run mode, returning the API server's
// warnings (PodSecurity's among them) and refusals.
//
// WriteServingCert and WriteServiceAccountKey write the key material an API
// server on loopback needs; the bench's Kubernetes peer uses them too.
package kubeapi

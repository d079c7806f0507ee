// Package deploycheck holds the checks of no8s's deployment artefacts that run
// outside `make test`: the image (imagecheck, `make image-check`), the
// Compose topology run in network namespaces (composerun, `make deploy-check`)
// and the Helm chart against a real kube-apiserver (helmcheck, `make
// deploy-check`), its rendered objects read into pods and Services by
// kuberun.
// Their drivers are tests behind the build tag deploycheck, so that `go test
// work` does not build images or need root. One plain test runs with `make
// test`: the workspace's modules hold no module of Kubernetes, etcd,
// controller-runtime or Helm, and go.work does not use tools/k8s, the module
// that `make k8s-tools` builds them from.
package deploycheck

// Package deploycheck holds the checks of no8s's deployment artefacts that run
// outside `make test`: the image (imagecheck, `make image-check`) and the
// Compose topology run in network namespaces (composerun, `make deploy-check`).
// Their drivers are tests behind the build tag deploycheck, so that `go test
// work` does not build images or need root.
package deploycheck

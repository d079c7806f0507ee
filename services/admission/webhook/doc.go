// Package webhook runs the admission webhook chain: it keeps the registered
// webhooks of the store in a registry that every admission replica refreshes
// on its own (a cheap poll, so changes apply within a second without a
// restart), calls the matching webhooks over HTTP(S) with reused
// connections, applies the RFC 6902 patches of mutating webhooks to the
// resource document, and turns denials and failures into the errors the API
// answers with. docs/webhooks.md describes the contract for webhook authors.
//
// The wire shapes are in review.go, the patch rules in patch.go, the chain in
// chain.go, the registry in registry.go.
package webhook

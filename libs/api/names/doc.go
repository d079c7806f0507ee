// Package names holds the naming rules of no8s and their limits, each with
// one message: resource names and namespaces (DNS-1123 labels) and the
// default namespace, type names and versions, label and annotation keys,
// label values, finalizers, DNS subdomains, the reconciler finalizer's
// form, and the size limits every writer enforces.
//
// A check returns a *FieldError (nil when the value is valid): a JSON
// pointer and a message, a plain struct that the services turn into their
// HTTP or gRPC errors and the SDK into Go errors.
package names

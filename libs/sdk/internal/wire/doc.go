// Package wire is the contract between the SDK's engine and the machinery
// that runs it: the resource as the store holds it and its protobuf
// conversions, the store connection's interfaces, one attempt's input
// (Attempt) and outcome (Report, Completion), the store's refusals as
// sentinel errors, and the engine's defaults.
//
// It is internal: the worker runtime (package worker), the store clients
// (package client), the registry and the test kit use it; reconciler authors
// write against the root package, which re-exports what they read
// (Resource, Client, ListOptions, ErrNotFound) and nothing of the wire.
package wire

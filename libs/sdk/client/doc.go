// Package client talks to the store's worker door over gRPC: the
// WorkerService, served on the store's worker listener (127.0.0.1:7003 by
// default) and nothing else there. Store implements the engine's store
// connection (sdk.Client: reads, and the reconciler's own finalizer under
// an attempt's lease), and Leases
// wraps the calls a worker makes around one attempt (AcquireLease,
// RenewLease, CompleteReconcile), presenting the lease epoch on every
// fenced write. Spec, type and webhook writes are not offered: they go
// through the public API and admission.
//
// Errors keep their gRPC status and match the runtime's sentinels (the SDK's
// internal wire package) with errors.Is: NotFound is sdk.ErrNotFound,
// Aborted/stale_epoch is ErrStaleEpoch, Aborted/lease_held is ErrLeaseHeld,
// FailedPrecondition/stale_dispatch is ErrStaleDispatch, Unavailable and
// DeadlineExceeded are ErrUnavailable.
package client

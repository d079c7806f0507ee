// Package client talks to the store's worker door over gRPC: the
// WorkerService, served on the store's worker listener (127.0.0.1:7003 by
// default) and nothing else there. Store implements sdk.ReadWriter (reads,
// and the reconciler's own finalizer under an attempt's lease), and Leases
// wraps the calls a worker makes around one attempt (AcquireLease,
// RenewLease, CompleteReconcile), presenting the lease epoch on every
// fenced write. Spec, type and webhook writes are not offered: they go
// through the public API and admission.
//
// Errors keep their gRPC status and match the sdk sentinels with errors.Is:
// NotFound is sdk.ErrNotFound, Aborted/stale_epoch is sdk.ErrStaleEpoch,
// Aborted/lease_held is sdk.ErrLeaseHeld, FailedPrecondition/stale_dispatch
// is sdk.ErrStaleDispatch, Unavailable and DeadlineExceeded are
// sdk.ErrUnavailable.
package client

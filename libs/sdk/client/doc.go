// Package client talks to the store over gRPC: Store implements
// sdk.ReadWriter over the StoreService (reads, finalizers, manual triggers),
// and Leases wraps the ReconcileService calls a worker makes around one
// attempt (AcquireLease, RenewLease, CompleteReconcile), presenting the
// lease epoch on every fenced write.
//
// Errors keep their gRPC status and match the sdk sentinels with errors.Is:
// NotFound is sdk.ErrNotFound, Aborted/stale_epoch is sdk.ErrStaleEpoch,
// Aborted/lease_held is sdk.ErrLeaseHeld, FailedPrecondition/stale_dispatch
// is sdk.ErrStaleDispatch, Unavailable and DeadlineExceeded are
// sdk.ErrUnavailable.
package client

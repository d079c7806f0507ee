package client

// Error codes of the server's error answers (Error.Code). Each belongs to
// one HTTP status, given in brackets where the name does not say it.
const (
	CodeInvalid          = "invalid"
	CodeValidationFailed = "validation_failed"
	CodeMalformedJSON    = "malformed_json"
	CodeUnknownType      = "unknown_type"
	CodeInvalidSchema    = "invalid_schema"
	CodeNotFound         = "not_found"
	CodeNameTaken        = "name_taken"
	CodeConflict         = "conflict"
	CodeDeleting         = "deleting"
	CodeInUse            = "in_use"
	CodeSchemaChanged    = "schema_changed"
	CodeTooLarge         = "too_large"
	CodeUnavailable      = "unavailable"
	CodeInternal         = "internal"
	CodeFinalizerBlocked = "finalizer_not_allowed"
	// CodeDenied is an admission webhook's denial (Forbidden).
	CodeDenied = "denied"
	// CodeWebhookFailed is an admission webhook that failed under failure
	// policy Fail (Unavailable).
	CodeWebhookFailed = "webhook_failed"
	// CodeStaleEpoch is a write fenced by an epoch that is no longer the
	// current one (Conflict): a reconcile lease or the scheduler's leadership
	// has passed to someone else.
	CodeStaleEpoch = "stale_epoch"
	// CodeLeaseHeld is a reconcile lease held by another worker (Conflict).
	CodeLeaseHeld = "lease_held"
	// CodeStaleDispatch is a work item from a deposed scheduler or superseded
	// by a newer dispatch (FailedPrecondition).
	CodeStaleDispatch = "stale_dispatch"
	// CodeNotOwned is a worker's write to something that is not its own: a
	// finalizer other than its reconciler's, an annotation other than the
	// operation annotation (Forbidden).
	CodeNotOwned = "not_owned"
	// CodeNoReconciler is a resource type that no live reconciler serves
	// (Invalid).
	CodeNoReconciler = "no_reconciler"
	// CodeKeyReused is a queue-input message whose idempotency key was
	// used by another message with a different body (Conflict): the
	// first one wins.
	CodeKeyReused = "idempotency_key_reused"
	// CodeUndeliverable is a queue-input message given up unhandled after
	// its deliveries ran out (Unavailable): the gateways handling it kept
	// stopping.
	CodeUndeliverable = "undeliverable"
	// CodeNamespaceNotFound is a resource created in a namespace that does
	// not exist (NotFound).
	CodeNamespaceNotFound = "namespace_not_found"
	// CodeNamespaceTerminating is a resource (or the namespace itself)
	// created in a namespace that is being deleted (Conflict).
	CodeNamespaceTerminating = "namespace_terminating"
	// CodeNamespaceProtected is a request to delete the default namespace,
	// which always exists (Forbidden).
	CodeNamespaceProtected = "namespace_protected"
	// CodeGone is a watch resume point older than the retained history
	// (410, or a watch's ERROR frame).
	CodeGone = "gone"
	// CodeTooSlow ends a watch whose reader fell too far behind (an ERROR
	// frame).
	CodeTooSlow = "too_slow"
	// CodeUnauthenticated is a request without credentials, or with ones
	// the server refused (401 with WWW-Authenticate).
	CodeUnauthenticated = "unauthenticated"
	// CodeRateLimited is a request over one of its caller's limits
	// (429 Too Many Requests with Retry-After): requests per second or
	// open watches per identity, bodies read at once per address.
	CodeRateLimited = "rate_limited"
)

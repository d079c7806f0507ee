package names

// Operation annotations (as in the openMCP controller guidelines): the one
// home of the key and its values, read by the scheduler, the store and the
// SDK's engine.
const (
	// OperationAnnotation asks for an operation on a resource.
	OperationAnnotation = "no8s.io/operation"
	// OperationReconcile forces one reconcile with every "nothing to do"
	// shortcut disabled; the reconciler removes the annotation afterwards.
	OperationReconcile = "reconcile"
	// OperationIgnore pauses the resource: no attempt is made.
	OperationIgnore = "ignore"
)

// Package sdk is the no8s reconciler SDK: the Step engine that third
// parties write reconcilers with.
//
// A reconciler is an Engine running Steps on one resource at a time
// (after okofw's reconcile engine):
//
//	engine := sdk.New[BucketSpec]("buckets", ensureBucket{}, ensureACL{}).
//		WithConditions("BucketExists", "ACLApplied")
//	worker.Main(engine, sdk.Type("Bucket", "v1")) // package worker
//
// For each attempt the engine builds a Request (the fresh resource, its
// decoded spec, a Scratch map shared by the steps, a logger carrying the
// reconcile id, the store connection Client for other resources and its own
// finalizers, the secret resolver), then:
//
//   - skips the resource when it carries no8s.io/operation: ignore;
//   - sets Request.Force when it carries no8s.io/operation: reconcile, and
//     removes that annotation with the result;
//   - while the resource lives: adds its finalizer reconciler.no8s.io/<name>
//     if missing, before the first Do, then runs Do of each step in order;
//   - while it is being deleted: runs Cleanup in reverse order, and removes
//     its finalizer once every Cleanup succeeded (the store purges the
//     resource when no finalizer remains);
//   - always runs Post of every step, even after a failure;
//   - derives Ready from the other conditions and the phase (Terminating,
//     Ready, Progressing), and saves status, conditions, outputs, finalizer
//     and annotation changes and one history row in one call.
//
// How an attempt ends (the Step doc has the rules): done, requeue-after (not
// done yet; no failure counted), error (failed; the scheduler retries with
// exponential backoff) or terminal error (Terminal; not retried until the
// spec changes or a manual trigger). Panics in steps are recovered into
// errors. The request is level-based: a step looks at the resource and the
// world as they are now, never at what event caused the attempt.
//
// Conditions are unique by type, carry the generation they were computed
// for, and keep their last transition time unless their status changes
// (package conditions). A run whose steps are all done while a condition is
// not True ends as a requeue, so that the lifecycle status (ready only on
// success) and the phase (Ready only when every condition is True) always
// agree.
//
// This package is what a reconciler is written against, and only that: the
// engine (New, Engine), steps (Step, Cleaner, Poster, StepFuncs, Func), the
// request (Request, NewRequest, Lookup), results (Result, RequeueAfter),
// errors (Terminal, Degraded and their f and Is forms), the resource a step
// reads (Resource, TypeRef, Type, Event) and the store connection of
// Request.Client (Client, ListOptions, ErrNotFound). How the worker runtime
// drives the engine (an attempt's input and outcome, the store's protobuf
// forms, its refusals) is internal to the SDK.
//
// The vocabulary has one home each: Event types, the operation annotation
// and a reconciler's finalizer are in libs/api's names (names.EventWarning,
// names.OperationAnnotation, names.ReconcilerFinalizer), outcomes and
// phases in libs/api's lifecycle, lifecycle statuses in libs/client
// (client.StatusReady), the reasons the engine writes on Ready in package
// conditions (conditions.ReasonReconcileError), and the condition RunAction
// keeps in package action (action.ConditionSucceeded).
//
// Packages: conditions (condition lists), secret (secret references),
// action (action plugins), worker (the runtime), client (gRPC clients of
// the store), registry (live reconcilers), and the separate module testkit
// (a real control plane in-process for tests, and Reconcile: one attempt in
// memory).
package sdk

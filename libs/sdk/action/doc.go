// Package action is the interface of action plugins: executors to which a
// reconciler hands the real work of a resource (a CI workflow, a pipeline,
// an HTTP call), and the Registry in which a reconciler finds one by name,
// as the original Operator Controller's
// ctx.get_action_plugin("github_actions") does.
//
// A step reaches the engine's registry through its request
// (sdk.Request.Action, or sdk.Request.RunAction, which also keeps the
// plugin's finalizer, its outputs and a condition). GitHub Actions is
// package action/github.
//
// Work on a CI system takes minutes, so a plugin never waits for it: each
// call starts the work or looks at it once and returns a Status. What the
// plugin needs to find its work again (a run id, a correlation id) goes in
// Status.Outputs, which the engine saves with the attempt's result before
// the attempt comes back after Status.RequeueAfter. No worker slot is held
// while the work runs, and any replica continues it after any restart.
package action

// Package reconcilerworker holds no8s's built-in reconcilers, each in its own
// package and each deployable alone as a subcommand of the no8s-reconciler
// binary (services/cmd/no8s-reconciler), on the SDK's worker runtime
// (libs/sdk/worker):
//
//   - noop: marks the resources of the types named on its command line
//     ready, for demos, tests and benchmarks;
//   - postgresdb: PostgresDatabase/v1, a database and its owner role on a
//     PostgreSQL server;
//   - githubworkflow: GitHubWorkflow/v1, a GitHub Actions workflow run per
//     generation through the SDK's github_actions action plugin.
//
// typereg registers a reconciler's resource type through the public API
// (--register-type).
package reconcilerworker

// Package platform is the root of no8s's infrastructure module: the packages
// every no8s process runs on, which the services and the SDK's worker
// runtime both import. It exports nothing itself; its packages are:
//
//   - outbound: the address rule of every server-side outbound call
//   - health: the /healthz and /readyz probes
//   - logging: the logger (NO8S_LOG_FORMAT, NO8S_LOG_LEVEL)
//   - secret: secret references and their resolvers, redacted values
//   - profiling: the loopback-only pprof listener
//   - tracing: the trace context across gRPC, HTTP, NATS and stored records
//     (tracing/otlp, a module of its own, exports the spans)
//   - metrics: the per-process Prometheus registry and recorders
//   - identity: the processes' names and their TLS credentials
//
// The module depends on neither the services nor the SDK (a test checks
// it), so a service uses this infrastructure without depending on the API
// that reconciler authors write against.
package platform

// Package metrics is the one home of the Prometheus plumbing every no8s
// process shares, the services and the reconciler workers alike: a
// registry per process (NewRegistry, with the Go runtime and process
// collectors), the /metrics handler (Handler), gRPC server and client
// interceptors (GRPCServer, GRPCClient), an HTTP request recorder with
// label-bound children cached per route (HTTP), and small helpers that
// expose counters a component already keeps (CounterFunc, GaugeFunc).
//
// Nothing here registers on prometheus.DefaultRegisterer: main builds one
// registry and passes it (as a prometheus.Registerer) to whatever records
// metrics. A nil Registerer records nothing, so tests and library users
// that do not care pass nil.
//
// Every metric is named no8s_<subsystem>_<name>_<unit> (counters end in
// _total, durations are seconds) and its labels are bounded: route
// templates, gRPC methods, type names, outcomes; never a resource's name,
// id, namespace, label value or a URL.
package metrics

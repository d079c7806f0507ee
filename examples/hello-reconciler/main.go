// Command hello-reconciler is an out-of-tree no8s reconciler: it serves the
// Greeting/v1 resource type. It is configured from the environment
// (NATS_URL, NO8S_STORE_ADDR, NO8S_HEALTH_LISTEN, NO8S_MAX_CONCURRENCY, ...);
// see README.md.
package main

import "github.com/no8s/no8s/libs/sdk/worker"

func main() { worker.Main(New(), Type) }

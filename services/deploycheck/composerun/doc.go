// Package composerun runs a Compose file as written without a container
// engine: each service is its own process in its own network namespace,
// joined by veth pairs to a bridge in a namespace of its own (never the
// root namespace), on the test range Subnet; /etc/netns/<ns>/hosts maps the
// service names; published ports are reachable only from a client
// namespace, where the check's client runs. The file is validated and
// normalised by docker-compose first; command, environment, healthcheck,
// depends_on conditions, restart, ports, volumes and user are honoured.
// A caller may give the services itself (Config.File) with virtual
// addresses forwarding to the ready ones (Config.VIPs) and HTTP health
// checks: package kuberun runs a Helm chart's rendered objects so. Images
// are substituted only by a printed table (the no8s image's own binaries,
// postgres:N by Debian's PostgreSQL, nats:N by the pinned nats-server);
// any other image fails the run, naming the service.
//
// Start brings a file up (and removes everything it made on any failure,
// on Close and on SIGINT/SIGTERM); Flow is the check through the gateways'
// published ports (or the Targets a caller names). The drivers are the
// tests behind the build tag
// deploycheck (`make deploy-check`, as root).
package composerun

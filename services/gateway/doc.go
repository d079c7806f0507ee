// Package gateway is the api-gateway service of no8s: the public REST API
// (/api/v1/...) in front of the admission and store services.
//
// The gateway owns the HTTP edge and nothing else. For every write it checks
// the request's shape (size limit, content type, strict JSON decoding with
// the offending field named, names and metadata), asks admission to validate
// and default the spec, and then asks the store to write the admitted
// resource together with the schema revision it was admitted against. A
// store answer of schema_changed (the type's schema changed between the two
// calls) makes the gateway admit again with a fresh schema. Bad input never
// reaches the store.
//
// Every request first passes the HTTP edge (handler_edge.go): security
// headers, HEAD answered as GET, a JSON Content-Type on writes with a body,
// and body reads bounded in time, number and size (an oversized body is
// read and discarded within BodyReadTimeout so that its client reads the 413).
// Serve adds header and idle timeouts; event streams are exempt from all of
// them. Then the limits per caller (handler_limits.go): requests per second
// and open watches per identity, bodies read at once per source address;
// over one, 429 rate_limited with Retry-After. Webhook URLs are checked against the outbound address rule
// (Config.Outbound, package libs/platform/outbound) at registration.
//
// Every error is a JSON document
//
//	{"detail": "...", "code": "...", "errors": [{"path": "/spec/x", "message": "..."}]}
//
// with the HTTP status derived from the problem kind (see package problem);
// every 429 and 503 carries Retry-After.
//
// Watches (GET /api/v1/events, GET /api/v1/resources/{id}/events) stream the
// NO8S_EVENTS JetStream stream as Server-Sent Events, resumable by revision;
// package watch holds the mechanism and docs/watch.md the contract.
// The full API is described by the OpenAPI 3.0 document served at
// GET /api/v1/openapi.json.
package gateway

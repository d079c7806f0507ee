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
// Every error is a JSON document
//
//	{"detail": "...", "code": "...", "errors": [{"path": "/spec/x", "message": "..."}]}
//
// with the HTTP status derived from the problem kind (see package problem).
//
// Watches (GET /api/v1/events, GET /api/v1/resources/{id}/events) stream the
// NO8S_EVENTS JetStream stream as Server-Sent Events, resumable by revision;
// package watch holds the mechanism and docs/watch.md the contract.
// The full API is described by the OpenAPI 3.0 document served at
// GET /api/v1/openapi.json.
package gateway

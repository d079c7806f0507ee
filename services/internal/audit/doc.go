// Package audit records who changed what through the API, and who was
// refused: one Record per write and per denied request, written as a JSON
// line to the audit log and, optionally, published on the audit stream
// (subjects.AuditStream). docs/security.md, "Audit log", is the reader's
// guide.
//
// A request carries a mutable Entry in its context (WithEntry, EntryFrom)
// that the layers it passes fill in: the object it is about (SetObject),
// its verb (SetVerb), a denial and its reason (Deny). Every method of a
// nil *Entry does nothing, so a layer may call them on a request that is
// not audited.
//
// The Recorder never blocks a request: Record puts the record on a
// bounded queue that Run empties, writing the log and publishing on the
// stream; when the queue is full the record is dropped, counted
// (no8s_audit_records_dropped_total) and a warning logged with the count.
// When Run's context ends it drains the queue before it returns.
//
// What a record never holds: request or response bodies, headers, query
// strings, token secrets. Its route is the route template
// (/api/v1/resources/:id), never the URL.
package audit

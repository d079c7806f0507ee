package subjects

import "time"

// The audit stream: with --audit-stream, every gateway publishes one
// audit record (a JSON document, services/internal/audit.Record) per write
// and per denied request on Audit(outcome), kept in the stream
// AuditStream, which the gateways create and update at start
// (docs/security.md, "Audit log").
const (
	// AuditStream is the audit stream's name.
	AuditStream = "NO8S_AUDIT"
	// AuditPrefix prefixes the audit subjects: no8s.audit.<outcome>.
	AuditPrefix = "no8s.audit"
	// AuditAll matches every audit subject (the stream's subject filter).
	AuditAll = AuditPrefix + ".>"
	// AuditMaxAge is how long audit records are kept by default
	// (--audit-max-age).
	AuditMaxAge = 720 * time.Hour
)

// Audit is the subject of the audit records of one outcome: succeeded,
// failed or denied.
func Audit(outcome string) string { return AuditPrefix + "." + outcome }

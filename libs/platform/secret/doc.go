// Package secret resolves secret references found in resource specs.
//
// A spec never carries a secret itself, only a reference to one:
//
//	{"password": {"env": "PG_ADMIN_PASSWORD"}}
//	{"password": {"file": "/run/secrets/pg-admin"}}
//
// The worker resolves a reference from its own environment and files
// (Local), or from anything else that implements Resolver: a secret store
// supports more kinds by handling other keys ({"vault": "kv/pg"}) and is
// chained in front of Local with Chain.
//
// Resolved values are Values, whose String, Format, LogValue and
// MarshalJSON all print "[redacted]": a value reaches a log line, an error
// or a status only when the code asks for it with Reveal or Bytes. Errors
// name the reference (the variable or path), never the value.
package secret

// Package migrations holds the versioned SQL migrations of the store's
// schemas: PostgreSQL's (FS), applied by goose from the store's `migrate`
// command and, under an advisory lock, when a store process starts; and the
// embedded SQLite store's (SQLite), applied by goose when the embedded store
// opens its file.
package migrations

import (
	"embed"
	"io/fs"
)

// FS holds the PostgreSQL *.sql migration files, named
// NNNNN_description.sql.
//
//go:embed *.sql
var FS embed.FS

//go:embed sqlite/*.sql
var sqliteFS embed.FS

// Builtin holds the schemas of the built-in resource types that the
// migrations create (builtin/<Type>.<version>.json); 00006_events_tenants.sql
// and sqlite/00003_events_tenants.sql (the tenant types), 00008_httpsource.sql
// and sqlite/00004_httpsource.sql (HttpSource) carry them in compact form
// (TestBuiltinSchemasInMigrations).
//
//go:embed builtin/*.json
var Builtin embed.FS

// SQLite returns the embedded store's migrations (the sqlite folder), named
// NNNNN_description.sql like FS's. One set per backend: the schemas are
// equivalent, their SQL is not.
func SQLite() fs.FS {
	sub, err := fs.Sub(sqliteFS, "sqlite")
	if err != nil {
		// fs.Sub fails only on an invalid path: "sqlite" is valid.
		panic(err)
	}
	return sub
}

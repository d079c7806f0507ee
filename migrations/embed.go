// Package migrations holds the versioned SQL migrations of the store's
// PostgreSQL schema. They are applied by goose from the store's `migrate`
// command and, under an advisory lock, when a store process starts.
package migrations

import "embed"

// FS holds the *.sql migration files, named NNNNN_description.sql.
//
//go:embed *.sql
var FS embed.FS

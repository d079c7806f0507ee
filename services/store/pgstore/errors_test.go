package pgstore

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/no8s/no8s/services/store/storage"
)

// TestTranslateUnavailable pins which database errors answer 503
// unavailable (issue 27): a database that refuses connections, terminated
// sessions, a read-only server, too many connections, a server in
// recovery; and that the rest stay what they were.
func TestTranslateUnavailable(t *testing.T) {
	for _, code := range []string{"08000", "08001", "08003", "08006", "57P01", "57P02", "57P03", "53300", "25006", "55000"} {
		pgErr := &pgconn.PgError{Severity: "FATAL", Code: code, Message: "m"}
		err := translate(fmt.Errorf("insert resource: %w", pgErr))
		var se *storage.Error
		if !errors.As(err, &se) || !errors.Is(err, storage.ErrUnavailable) {
			t.Errorf("SQLSTATE %s: %v, want unavailable", code, err)
			continue
		}
		var kept *pgconn.PgError
		if !errors.As(se.Cause, &kept) || kept.SQLState() != code {
			t.Errorf("SQLSTATE %s: cause %v not kept for the log", code, se.Cause)
		}
	}
	for code, want := range map[string]error{"23505": storage.ErrNameTaken, "40001": storage.ErrConflict} {
		if err := translate(&pgconn.PgError{Code: code}); !errors.Is(err, want) {
			t.Errorf("SQLSTATE %s: %v, want %v", code, err, want)
		}
	}
	if err := translate(&pgconn.PgError{Code: "22P05"}); storage.Translated(err) {
		t.Errorf("SQLSTATE 22P05: %v, want an unexpected (internal) error", err)
	}

	// A server that refuses connections: nothing listens on port 1.
	_, err := pgx.Connect(t.Context(), "postgres://postgres@127.0.0.1:1/x?sslmode=disable&connect_timeout=2")
	if err == nil {
		t.Fatal("connected to port 1")
	}
	if err := translate(err); !errors.Is(err, storage.ErrUnavailable) {
		t.Errorf("connection refused: %v, want unavailable", err)
	}
}

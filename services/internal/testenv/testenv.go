// Package testenv starts the real dependencies that tests need: a fresh
// PostgreSQL database per test package on the local server, and an embedded
// NATS server with JetStream; and it names what tests create on shared
// servers (names.go).
package testenv

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/no8s/no8s/services/internal/natsembed"
	"github.com/no8s/no8s/services/store/migrate"
)

// AdminURLEnv names the variable with the admin connection string of the test
// PostgreSQL server.
const AdminURLEnv = "NO8S_TEST_DATABASE_URL"

// DefaultAdminURL is the local server as CI sets it up.
const DefaultAdminURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

func adminURL() string {
	if u := os.Getenv(AdminURLEnv); u != "" {
		return u
	}
	return DefaultAdminURL
}

// Database creates a fresh, empty database and returns its URL. The database
// is dropped when the test (or, with a TestMain, the package) ends.
func Database(tb testing.TB) string {
	tb.Helper()
	u, cleanup, err := CreateDatabase(context.Background(), "t")
	if err != nil {
		tb.Fatalf("create test database: %v", err)
	}
	tb.Cleanup(cleanup)
	return u
}

// CreateDatabase creates a fresh database of this run (Name(prefix)) and
// returns its URL and a function that drops it.
func CreateDatabase(ctx context.Context, prefix string) (string, func(), error) {
	admin := adminURL()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", nil, fmt.Errorf("connect to %s (set %s): %w", admin, AdminURLEnv, err)
	}
	defer conn.Close(ctx)
	name := Name(prefix)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", nil, fmt.Errorf("create database %s: %w", name, err)
	}
	pu, err := url.Parse(admin)
	if err != nil {
		return "", nil, err
	}
	pu.Path = "/" + name
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, admin)
		if err != nil {
			return
		}
		defer c.Close(ctx)
		_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	}
	return pu.String(), drop, nil
}

// NATS starts an embedded NATS server with JetStream in a temporary
// directory and returns it; it shuts down when the test ends.
func NATS(tb testing.TB) *server.Server {
	tb.Helper()
	s, err := natsembed.Start(tb.TempDir(), -1, nil)
	if err != nil {
		tb.Fatalf("start nats: %v", err)
	}
	tb.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s
}

// Connect connects to an embedded server.
func Connect(tb testing.TB, s *server.Server) *nats.Conn {
	tb.Helper()
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		tb.Fatalf("connect to nats: %v", err)
	}
	tb.Cleanup(nc.Close)
	return nc
}

// MigratedPool returns a pool on a fresh database of the test package
// (Database) with the store's migrations applied; it closes when tb ends.
func MigratedPool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, Database(tb))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pool.Close)
	if _, err := migrate.Up(ctx, pool, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		tb.Fatal(err)
	}
	return pool
}

// LogBuffer is a log sink that several goroutines may write to at once.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

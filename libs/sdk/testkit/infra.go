package testkit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats-server/v2/server"
)

// AdminURLEnv names the variable holding the admin connection string of
// the PostgreSQL server that test databases are created on.
const AdminURLEnv = "NO8S_TEST_DATABASE_URL"

// DefaultAdminURL is the local server.
const DefaultAdminURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

func adminURL(override string) string {
	if override != "" {
		return override
	}
	if u := os.Getenv(AdminURLEnv); u != "" {
		return u
	}
	return DefaultAdminURL
}

// CreateDatabase creates a fresh, empty database on the server of admin and
// returns its URL and a function that drops it.
func CreateDatabase(ctx context.Context, admin string) (string, func(), error) {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", nil, fmt.Errorf("connect to PostgreSQL (set %s): %w", AdminURLEnv, err)
	}
	defer conn.Close(ctx)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "no8s_testkit_" + hex.EncodeToString(b)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", nil, fmt.Errorf("create database %s: %w", name, err)
	}
	u, err := url.Parse(admin)
	if err != nil {
		return "", nil, fmt.Errorf("parse %s: %w", AdminURLEnv, err)
	}
	u.Path = "/" + name
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
	return u.String(), drop, nil
}

// StartNATS starts an embedded NATS server with JetStream on a free
// loopback port, storing its streams in dir.
func StartNATS(dir string) (*server.Server, error) {
	s, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true,
	})
	if err != nil {
		return nil, fmt.Errorf("configure nats server: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, fmt.Errorf("nats server not ready within 10s")
	}
	return s, nil
}

package store

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/no8s/no8s/services/store/litestore"
	"github.com/no8s/no8s/services/store/migrate"
	"github.com/no8s/no8s/services/store/pgoutbox"
	"github.com/no8s/no8s/services/store/pgstore"
	"github.com/no8s/no8s/services/store/storage"
)

// SQLiteScheme starts a DatabaseURL that names the embedded backend's
// database file: sqlite:<path>.
const SQLiteScheme = "sqlite:"

// Open opens the backend that cfg.DatabaseURL names, applying its
// migrations when cfg.Migrate is set: postgres:// and postgresql:// URLs
// and libpq key=value strings are PostgreSQL; sqlite:<path> is the embedded
// backend. It is the only place a backend is chosen.
func Open(ctx context.Context, cfg Config, opts storage.Options, log *slog.Logger) (storage.Backend, error) {
	switch kind, err := backendOf(cfg.DatabaseURL); {
	case err != nil:
		return storage.Backend{}, err
	case kind == "postgres":
		return openPostgres(ctx, cfg, opts, log)
	default:
		return openSQLite(ctx, cfg, opts, log)
	}
}

// backendOf names the backend of a database URL.
func backendOf(url string) (string, error) {
	switch {
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		return "postgres", nil
	case strings.HasPrefix(url, SQLiteScheme):
		return "sqlite", nil
	case !strings.Contains(url, "://") && strings.Contains(url, "="):
		// A libpq key=value connection string (host=... dbname=...).
		return "postgres", nil
	}
	scheme, _, _ := strings.Cut(url, ":")
	return "", fmt.Errorf("database url: unknown scheme %q: use postgres://, postgresql://, a key=value PostgreSQL string, or sqlite:<path>", scheme)
}

func openPostgres(ctx context.Context, cfg Config, opts storage.Options, log *slog.Logger) (storage.Backend, error) {
	pool, err := OpenPool(ctx, cfg.DatabaseURL, cfg.MaxConns)
	if err != nil {
		return storage.Backend{}, err
	}
	if cfg.Migrate {
		v, err := migrate.Up(ctx, pool, log)
		if err != nil {
			pool.Close()
			return storage.Backend{}, err
		}
		log.Info("database schema ready", "version", v)
	} else if err := waitForSchema(ctx, pool, cfg.SchemaPoll, log); err != nil {
		pool.Close()
		return storage.Backend{}, err
	}
	return storage.Backend{Store: pgstore.New(pool, opts), Log: pgoutbox.New(pool), Name: "postgres", Close: pool.Close}, nil
}

// waitForSchema returns once the database's schema is at least the newest
// this binary knows: without --migrate a store starts beside the migration
// step (a Compose one-shot service, a Helm hook or Job) and must not serve
// on an older schema. It says what it waits for when it starts waiting and
// every 30 seconds after; a database newer than the binary is fine (an
// upgrade migrates before the new stores roll out).
func waitForSchema(ctx context.Context, pool *pgxpool.Pool, every time.Duration, log *slog.Logger) error {
	if every <= 0 {
		every = 2 * time.Second
	}
	var said time.Time
	for {
		cur, newest, err := migrate.Status(ctx, pool)
		switch {
		case err == nil && cur >= newest:
			if !said.IsZero() {
				log.Info("database schema ready", "version", cur)
			}
			return nil
		case time.Since(said) >= 30*time.Second:
			said = time.Now()
			if err != nil {
				log.Warn("waiting for the database schema: run no8s-store migrate (or start with --migrate)", "error", err)
			} else {
				log.Warn("waiting for the database schema: run no8s-store migrate (or start with --migrate)", "version", cur, "newest", newest)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the database schema (migrate it with no8s-store migrate): %w", ctx.Err())
		case <-time.After(every):
		}
	}
}

// openSQLite opens the embedded backend's file (litestore): the
// development store, for one process or a few sharing one host.
func openSQLite(ctx context.Context, cfg Config, opts storage.Options, log *slog.Logger) (storage.Backend, error) {
	path := strings.TrimPrefix(cfg.DatabaseURL, SQLiteScheme)
	s, err := litestore.Open(ctx, path, opts)
	if err != nil {
		return storage.Backend{}, err
	}
	if cfg.Migrate {
		v, err := s.Migrate(ctx, log)
		if err != nil {
			_ = s.Close()
			return storage.Backend{}, err
		}
		log.Info("database schema ready", "version", v, "file", path)
	}
	return storage.Backend{Store: s, Log: s.EventLog(), Name: "sqlite", Close: func() { _ = s.Close() }}, nil
}

// OpenPool connects to PostgreSQL and checks the connection.
func OpenPool(ctx context.Context, url string, maxConns int32) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	if maxConns > 0 {
		pc.MaxConns = maxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("open database pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to database: %w", err)
	}
	return pool, nil
}

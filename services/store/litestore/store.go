package litestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pressly/goose/v3"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver

	"github.com/no8s/no8s/migrations"
	"github.com/no8s/no8s/services/store/storage"
)

// busyTimeout is how long a writer waits for the write lock held by another
// process (or a reader for a lock being upgraded) before it fails.
const busyTimeout = 10 * time.Second

// readConns bounds the read pool.
const readConns = 4

// Store is the SQLite implementation of storage.Store.
type Store struct {
	path string
	// w is the one write connection; r the read-only pool.
	w, r *sql.DB
	opts storage.Options
}

var _ storage.Store = (*Store)(nil)

// dsn is the driver's connection string for path: a file: URI whose
// _pragma parameters the driver runs on every new connection.
func dsn(path string, pragmas []string, txlock string) string {
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	q := url.Values{}
	for _, p := range pragmas {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", txlock)
	return "file:" + esc + "?" + q.Encode()
}

// Open opens the store's database file at path, creating it (and its
// directory) when missing; Migrate applies the schema.
func Open(ctx context.Context, path string, opts storage.Options) (*Store, error) {
	if path == "" {
		return nil, errors.New("open embedded store: empty database path")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open embedded store: %w", err)
	}
	busy := fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds())
	w, err := sql.Open("sqlite", dsn(path, []string{busy, "journal_mode(WAL)", "synchronous(NORMAL)", "foreign_keys(1)"}, "immediate"))
	if err != nil {
		return nil, fmt.Errorf("open embedded store %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	r, err := sql.Open("sqlite", dsn(path, []string{busy, "query_only(1)"}, "deferred"))
	if err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("open embedded store %s for reading: %w", path, err)
	}
	r.SetMaxOpenConns(readConns)
	r.SetMaxIdleConns(readConns)
	s := &Store{path: path, w: w, r: r, opts: opts}
	// The write connection first: it makes the file and turns WAL on.
	if err := w.PingContext(ctx); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("open embedded store %s: %w", path, err)
	}
	if err := r.PingContext(ctx); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("open embedded store %s for reading: %w", path, err)
	}
	return s, nil
}

// Migrate applies pending migrations (migrations.SQLite) and returns the
// schema version. It holds the migration lock (filelock.go) meanwhile, so
// that processes opening a new file together apply them once.
func (s *Store) Migrate(ctx context.Context, log *slog.Logger) (int64, error) {
	lock, err := takeFileLock(ctx, migrateLockFile(s.path), busyTimeout.Milliseconds())
	if err != nil {
		return 0, err
	}
	if lock == nil {
		return 0, fmt.Errorf("migrate %s: another process held the migration lock for %s", s.path, busyTimeout)
	}
	defer lock.release()
	p, err := goose.NewProvider(goose.DialectSQLite3, s.w, migrations.SQLite())
	if err != nil {
		return 0, fmt.Errorf("load embedded store migrations: %w", err)
	}
	results, err := p.Up(ctx)
	if err != nil {
		return 0, fmt.Errorf("apply embedded store migrations to %s: %w", s.path, err)
	}
	for _, r := range results {
		log.Info("applied migration", "version", r.Source.Version, "file", r.Source.Path, "duration", r.Duration)
	}
	v, err := p.GetDBVersion(ctx)
	if err != nil {
		return 0, fmt.Errorf("read embedded store schema version: %w", err)
	}
	return v, nil
}

// Path is the database file.
func (s *Store) Path() string { return s.path }

// Ping checks that the database file answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.r.PingContext(ctx); err != nil {
		return storage.Unavailable(err)
	}
	return nil
}

// Close closes the database's connections.
func (s *Store) Close() error {
	return errors.Join(s.r.Close(), s.w.Close())
}

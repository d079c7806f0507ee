// Package datasource reads a TenantRegistry's rows from its external
// database (MySQL/MariaDB through go-sql-driver/mysql, PostgreSQL through
// pgx), treating it as untrusted input: the connection goes through the
// outbound address rule (libs/platform/outbound) that webhooks follow, the
// credentials are secret references resolved only under the configured
// prefix (libs/platform/secret), and the table or query runs as it is written in
// a READ ONLY transaction with a statement timeout, reading at most a row
// limit (more is an error: a partial read must never look complete).
//
// A query is one read-only statement (tenancy.CheckQuery, admission's rule,
// checked again here), and the server enforces it: PostgreSQL gets it
// through the extended protocol (one statement; "; COMMIT; INSERT …" is a
// protocol error) in a READ ONLY transaction on a session started with
// default_transaction_read_only; MySQL/MariaDB through a connection without
// multi-statements in a READ ONLY transaction on a session set READ ONLY.
// A login that could write or reach outside the database is refused
// (ReasonPrivileged) unless the registry sets allowPrivilegedLogin.
package datasource

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/no8s/no8s/libs/platform/outbound"
	"github.com/no8s/no8s/libs/platform/secret"
	"github.com/no8s/no8s/services/internal/grants"
	"github.com/no8s/no8s/services/internal/tenancy"
)

// Limits bound a read.
type Limits struct {
	// StatementTimeout bounds the query (and the connection).
	StatementTimeout time.Duration
	// RowLimit is the most rows a read returns; one more is an error.
	RowLimit int
}

// Reader reads registries' rows.
type Reader struct {
	Dialer  *outbound.Dialer
	Secrets secret.Resolver
	Limits  Limits
	// Grants are the credential grants: a registry's credential is
	// resolved only when its namespace may send it to the source's
	// host:port (nil: nothing granted, every credential refused).
	Grants *grants.Set
}

// Row is one datasource row, its mapped values as text (nil: NULL).
type Row struct {
	UID, HostOrURL, Activate *string
	Extra                    map[string]*string
}

// Reasons say why a read failed (the registry's Synced condition carries
// them).
const (
	ReasonSecret       = "SecretUnresolved"
	ReasonAddress      = "AddressRefused"
	ReasonUnreachable  = "DatasourceUnreachable"
	ReasonAuth         = "AuthenticationFailed"
	ReasonQuery        = "QueryFailed"
	ReasonTooManyRows  = "TooManyRows"
	ReasonMapping      = "MappingInvalid"
	ReasonUnsupported  = "UnsupportedSource"
	ReasonRefused      = "QueryRefused"
	ReasonPrivileged   = "PrivilegedLogin"
	ReasonNotGranted   = "SecretNotGranted"
	defaultStmtTimeout = 10 * time.Second
	defaultRowLimit    = 100000
)

// Error is a failed read with its reason.
type Error struct {
	Reason string
	Err    error
}

// Error is what went wrong, without the reason: a condition or an Event
// shows the reason beside the message, which must not repeat it.
func (e *Error) Error() string { return e.Err.Error() }

func (e *Error) Unwrap() error { return e.Err }

func fail(reason string, format string, args ...any) *Error {
	return &Error{Reason: reason, Err: fmt.Errorf(format, args...)}
}

// Read reads every row of spec's table or query, a registry of namespace
// ns: all of them, or an error.
func (r *Reader) Read(ctx context.Context, ns string, spec tenancy.RegistrySpec) ([]Row, error) {
	dest := grants.Datasource(spec.Source.Host, spec.Source.DefaultPort())
	for _, ref := range []secret.Ref{spec.Source.UsernameRef, spec.Source.PasswordRef} {
		if ref.IsZero() {
			continue
		}
		if err := r.Grants.Allow(grants.UseDatasource, ns, ref, dest); err != nil {
			return nil, &Error{Reason: ReasonNotGranted, Err: err}
		}
	}
	lim := r.Limits
	if lim.StatementTimeout <= 0 {
		lim.StatementTimeout = defaultStmtTimeout
	}
	if lim.RowLimit <= 0 {
		lim.RowLimit = defaultRowLimit
	}
	user := spec.Source.Username
	if !spec.Source.UsernameRef.IsZero() {
		v, err := r.Secrets.Resolve(ctx, spec.Source.UsernameRef)
		if err != nil {
			return nil, &Error{Reason: ReasonSecret, Err: err}
		}
		user = v.Reveal()
	}
	var pass secret.Value
	if !spec.Source.PasswordRef.IsZero() {
		v, err := r.Secrets.Resolve(ctx, spec.Source.PasswordRef)
		if err != nil {
			return nil, &Error{Reason: ReasonSecret, Err: err}
		}
		pass = v
	}
	cols := columns(spec)
	ctx, cancel := context.WithTimeout(ctx, lim.StatementTimeout+5*time.Second)
	defer cancel()
	var q query
	switch spec.Source.Type {
	case tenancy.SourceMySQL:
		q = mysqlQuery{dialer: r.Dialer}
	case tenancy.SourcePostgres:
		q = pgQuery{dialer: r.Dialer}
	default:
		return nil, fail(ReasonUnsupported, "source type %q is not supported (mysql, postgres)", spec.Source.Type)
	}
	text := spec.Source.Query
	if text == "" {
		text = q.selectTable(spec.Source.Table, cols)
	} else if err := tenancy.CheckQuery(spec.Source.Type, text); err != nil {
		return nil, &Error{Reason: ReasonRefused, Err: err}
	}
	rows, err := q.read(ctx, spec.Source, user, pass, text, cols, lim)
	// A server's or driver's message never carries the credentials on (a
	// user name is one when it comes from a secret reference).
	creds := []secret.Value{pass}
	if !spec.Source.UsernameRef.IsZero() {
		creds = append(creds, secret.NewValue([]byte(user)))
	}
	var de *Error
	if errors.As(err, &de) {
		return nil, &Error{Reason: de.Reason, Err: secret.RedactError(de.Err, creds...)}
	}
	return rows, secret.RedactError(err, creds...)
}

// privileged refuses a login that holds the privileges listed in held
// (what the database said of the current user), unless the source allows
// it.
func privileged(src tenancy.Source, user string, held []string) error {
	if len(held) == 0 || src.AllowPrivilegedLogin {
		return nil
	}
	return fail(ReasonPrivileged, "the login %q holds %s: give the registry a read-only login (only SELECT on its table), or set source.allowPrivilegedLogin: true",
		user, strings.Join(held, ", "))
}

// columns are the mapped columns: uid, hostOrUrl, activate, then the
// extras.
func columns(spec tenancy.RegistrySpec) []string {
	cols := []string{spec.ValueMappings.UID, spec.ValueMappings.HostOrURL, spec.ValueMappings.Activate}
	for _, k := range sortedKeys(spec.ExtraValueMappings) {
		cols = append(cols, spec.ExtraValueMappings[k])
	}
	return cols
}

// query is one database's way of reading.
type query interface {
	selectTable(table string, cols []string) string
	read(ctx context.Context, src tenancy.Source, user string, pass secret.Value, text string, cols []string, lim Limits) ([]Row, error)
}

// scanner is a result set: its column names and rows of text or NULL.
type scanner interface {
	Next() bool
	Values() ([]*string, error)
	Err() error
}

// collect reads at most lim.RowLimit rows (one more is an error) and maps
// their columns (by name, case-insensitively) onto spec's mappings.
func collect(sc scanner, names []string, cols []string, extras []string, lim Limits) ([]Row, error) {
	index := map[string]int{}
	for i, n := range names {
		index[strings.ToLower(n)] = i
	}
	at := make([]int, len(cols))
	for i, c := range cols {
		j, ok := index[strings.ToLower(c)]
		if !ok {
			return nil, fail(ReasonMapping, "column %q is not in the result (columns: %s)", c, strings.Join(names, ", "))
		}
		at[i] = j
	}
	var out []Row
	for sc.Next() {
		if len(out) == lim.RowLimit {
			return nil, fail(ReasonTooManyRows, "more than %d rows: the registry-sync row limit (--row-limit); nothing was synced", lim.RowLimit)
		}
		vals, err := sc.Values()
		if err != nil {
			return nil, fail(ReasonQuery, "read row %d: %v", len(out)+1, err)
		}
		row := Row{UID: vals[at[0]], HostOrURL: vals[at[1]], Activate: vals[at[2]], Extra: map[string]*string{}}
		for i, k := range extras {
			row.Extra[k] = vals[at[3+i]]
		}
		out = append(out, row)
	}
	if err := sc.Err(); err != nil {
		return nil, classify(err)
	}
	return out, nil
}

// classify gives a database error its reason.
func classify(err error) *Error {
	var de *Error
	if errors.As(err, &de) {
		return de
	}
	if errors.Is(err, outbound.ErrRefused) {
		return &Error{Reason: ReasonAddress, Err: err}
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "Access denied"), strings.Contains(msg, "password authentication failed"), strings.Contains(msg, "SQLSTATE 28"):
		return &Error{Reason: ReasonAuth, Err: err}
	case strings.Contains(msg, "connection refused"), strings.Contains(msg, "dial "), strings.Contains(msg, "i/o timeout"),
		strings.Contains(msg, "no such host"), strings.Contains(msg, "failed to connect"), errors.Is(err, context.DeadlineExceeded):
		return &Error{Reason: ReasonUnreachable, Err: err}
	}
	return &Error{Reason: ReasonQuery, Err: err}
}

package datasource

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/no8s/no8s/libs/sdk/outbound"
	"github.com/no8s/no8s/libs/sdk/secret"
	"github.com/no8s/no8s/services/internal/tenancy"
)

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func extrasOf(cols []string) []string { return cols[3:] }

// quoteIdent quotes a (possibly schema-qualified) identifier with q.
func quoteIdent(name, q string) string {
	parts := strings.Split(name, ".")
	for i, p := range parts {
		parts[i] = q + strings.ReplaceAll(p, q, q+q) + q
	}
	return strings.Join(parts, ".")
}

func selectList(cols []string, q string) string {
	seen := map[string]bool{}
	var out []string
	for _, c := range cols {
		if !seen[c] {
			seen[c] = true
			out = append(out, quoteIdent(c, q))
		}
	}
	return strings.Join(out, ", ")
}

// mysqlQuery reads MySQL and MariaDB.
type mysqlQuery struct{ dialer *outbound.Dialer }

func (mysqlQuery) selectTable(table string, cols []string) string {
	return "SELECT " + selectList(cols, "`") + " FROM " + quoteIdent(table, "`")
}

func (m mysqlQuery) read(ctx context.Context, src tenancy.Source, user string, pass secret.Value, text string, cols []string, lim Limits) ([]Row, error) {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd = user, pass.Reveal()
	cfg.Net, cfg.Addr, cfg.DBName = "tcp", net.JoinHostPort(src.Host, strconv.Itoa(src.DefaultPort())), src.Database
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = lim.StatementTimeout, lim.StatementTimeout+5*time.Second, lim.StatementTimeout
	cfg.DialFunc = m.dialer.DialContext
	cfg.AllowNativePasswords = true
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fail(ReasonQuery, "mysql configuration: %v", err)
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	c, err := db.Conn(ctx)
	if err != nil {
		return nil, classify(err)
	}
	defer c.Close()
	// MariaDB bounds statements with max_statement_time (seconds), MySQL
	// with max_execution_time (milliseconds); each refuses the other's.
	_, errMaria := c.ExecContext(ctx, fmt.Sprintf("SET SESSION max_statement_time = %f", lim.StatementTimeout.Seconds()))
	if errMaria != nil {
		if _, err := c.ExecContext(ctx, fmt.Sprintf("SET SESSION max_execution_time = %d", lim.StatementTimeout.Milliseconds())); err != nil {
			return nil, classify(fmt.Errorf("set the statement timeout: %w", errors.Join(errMaria, err)))
		}
	}
	tx, err := c.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, classify(err)
	}
	defer func() { _ = tx.Rollback() }()
	rows, err := tx.QueryContext(ctx, text)
	if err != nil {
		return nil, classify(err)
	}
	defer rows.Close()
	names, err := rows.Columns()
	if err != nil {
		return nil, classify(err)
	}
	return collect(&sqlRows{rows: rows, n: len(names)}, names, cols, extrasOf(cols), lim)
}

// sqlRows reads database/sql rows as text.
type sqlRows struct {
	rows *sql.Rows
	n    int
}

func (r *sqlRows) Next() bool { return r.rows.Next() }
func (r *sqlRows) Err() error { return r.rows.Err() }
func (r *sqlRows) Values() ([]*string, error) {
	raw := make([]sql.RawBytes, r.n)
	dest := make([]any, r.n)
	for i := range raw {
		dest[i] = &raw[i]
	}
	if err := r.rows.Scan(dest...); err != nil {
		return nil, err
	}
	out := make([]*string, r.n)
	for i, b := range raw {
		if b != nil {
			s := string(b)
			out[i] = &s
		}
	}
	return out, nil
}

// pgQuery reads PostgreSQL.
type pgQuery struct{ dialer *outbound.Dialer }

func (pgQuery) selectTable(table string, cols []string) string {
	return "SELECT " + selectList(cols, `"`) + " FROM " + quoteIdent(table, `"`)
}

func (p pgQuery) read(ctx context.Context, src tenancy.Source, user string, pass secret.Value, text string, cols []string, lim Limits) ([]Row, error) {
	cfg, err := pgx.ParseConfig("")
	if err != nil {
		return nil, fail(ReasonQuery, "postgres configuration: %v", err)
	}
	cfg.Host, cfg.Port, cfg.Database = src.Host, uint16(src.DefaultPort()), src.Database
	cfg.User, cfg.Password = user, pass.Reveal()
	cfg.ConnectTimeout = lim.StatementTimeout
	cfg.TLSConfig, cfg.Fallbacks = nil, nil
	cfg.DialFunc = p.dialer.DialContext
	// The dialer resolves and checks names itself.
	cfg.LookupFunc = func(_ context.Context, host string) ([]string, error) { return []string{host}, nil }
	cfg.RuntimeParams = map[string]string{"application_name": "no8s-registry-sync"}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, classify(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, classify(err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL statement_timeout = %d", lim.StatementTimeout.Milliseconds())); err != nil {
		return nil, classify(err)
	}
	rows, err := tx.Query(ctx, text, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		return nil, classify(err)
	}
	defer rows.Close()
	var names []string
	for _, f := range rows.FieldDescriptions() {
		names = append(names, f.Name)
	}
	out, err := collect(&pgRows{rows: rows}, names, cols, extrasOf(cols), lim)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// pgRows reads pgx rows as text (the simple protocol answers text).
type pgRows struct{ rows pgx.Rows }

func (r *pgRows) Next() bool { return r.rows.Next() }
func (r *pgRows) Err() error {
	err := r.rows.Err()
	var pe *pgconn.PgError
	if errors.As(err, &pe) && strings.HasPrefix(pe.Code, "28") {
		return &Error{Reason: ReasonAuth, Err: err}
	}
	return err
}
func (r *pgRows) Values() ([]*string, error) {
	raw := r.rows.RawValues()
	out := make([]*string, len(raw))
	for i, b := range raw {
		if b != nil {
			s := string(b)
			out[i] = &s
		}
	}
	return out, nil
}

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

	"github.com/no8s/no8s/libs/platform/outbound"
	"github.com/no8s/no8s/libs/platform/secret"
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
	// Every transaction of the session is READ ONLY (the driver sends no
	// multi-statements, so the query cannot end this one and start
	// another).
	if _, err := c.ExecContext(ctx, "SET SESSION TRANSACTION READ ONLY"); err != nil {
		return nil, classify(fmt.Errorf("make the session read-only: %w", err))
	}
	held, err := mysqlPrivileges(ctx, c)
	if err != nil {
		return nil, classify(err)
	}
	if err := privileged(src, user, held); err != nil {
		return nil, err
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

// mysqlReadOnly are the privileges a registry's MySQL/MariaDB login may
// hold; any other (FILE, SUPER, a write, ALL PRIVILEGES, PROXY) makes it
// privileged.
var mysqlReadOnly = []string{"USAGE", "SELECT", "SHOW VIEW", "SHOW DATABASES"}

// mysqlPrivileges lists the privileges the session's login (and its
// active roles) holds beyond mysqlReadOnly, from SHOW GRANTS.
func mysqlPrivileges(ctx context.Context, c *sql.Conn) ([]string, error) {
	rows, err := c.QueryContext(ctx, "SHOW GRANTS")
	if err != nil {
		return nil, fmt.Errorf("read the login's grants: %w", err)
	}
	defer rows.Close()
	var held []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return nil, fmt.Errorf("read the login's grants: %w", err)
		}
		for _, p := range grantPrivileges(line) {
			if !slices.Contains(mysqlReadOnly, p) && !slices.Contains(held, p) {
				held = append(held, p)
			}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the login's grants: %w", err)
	}
	return held, nil
}

// grantPrivileges are the privileges of one SHOW GRANTS line ("GRANT
// SELECT, INSERT (a, b) ON `db`.* TO …"), upper case, column lists
// dropped; a role grant (no ON) has none; WITH GRANT OPTION counts as
// GRANT OPTION.
func grantPrivileges(line string) []string {
	up := strings.ToUpper(line)
	if !strings.HasPrefix(up, "GRANT ") {
		return nil
	}
	on := strings.Index(up, " ON ")
	if on < 0 {
		return nil
	}
	var out []string
	depth, start := 0, len("GRANT ")
	list := up[:on]
	for i := start; i <= len(list); i++ {
		if i < len(list) && list[i] == '(' {
			depth++
		}
		if i < len(list) && list[i] == ')' {
			depth--
		}
		if i == len(list) || (list[i] == ',' && depth == 0) {
			p := list[start:i]
			if k := strings.IndexByte(p, '('); k >= 0 {
				p = p[:k]
			}
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
			start = i + 1
		}
	}
	if strings.Contains(up, "WITH GRANT OPTION") {
		out = append(out, "GRANT OPTION")
	}
	return out
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
	// Every transaction of the session is read-only, and statements are
	// bounded, from the start.
	cfg.RuntimeParams = map[string]string{
		"application_name":              "no8s-registry-sync",
		"default_transaction_read_only": "on",
		"statement_timeout":             strconv.FormatInt(lim.StatementTimeout.Milliseconds(), 10),
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, classify(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	held, err := pgPrivileges(ctx, conn)
	if err != nil {
		return nil, classify(err)
	}
	if err := privileged(src, user, held); err != nil {
		return nil, err
	}
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, classify(err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	// The extended protocol (Parse, Bind, Execute) takes one statement:
	// "SELECT …; COMMIT; INSERT …" is refused by the server before
	// anything runs. Results come as text.
	rr := conn.PgConn().ExecParams(ctx, text, nil, nil, nil, nil)
	fields := rr.FieldDescriptions()
	if fields == nil {
		_, err := rr.Close()
		if err == nil {
			err = errors.New("the query returned no rows")
		}
		return nil, classify(err)
	}
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.Name
	}
	return collect(&pgRows{rows: rr}, names, cols, extrasOf(cols), lim)
}

// pgPrivilegedRoles are the predefined roles that let a PostgreSQL login
// reach outside the database or write everywhere.
var pgPrivilegedRoles = []string{"pg_read_server_files", "pg_write_server_files", "pg_execute_server_program", "pg_signal_backend", "pg_write_all_data"}

// pgPrivileges lists what makes the session's login privileged: superuser,
// or membership (direct or inherited) of pgPrivilegedRoles.
func pgPrivileges(ctx context.Context, conn *pgx.Conn) ([]string, error) {
	rows, err := conn.Query(ctx, `SELECT 'superuser' FROM pg_roles WHERE rolname = current_user AND rolsuper
		UNION ALL SELECT rolname::text FROM pg_roles WHERE rolname = ANY($1) AND pg_has_role(current_user, oid, 'MEMBER')`, pgPrivilegedRoles)
	if err != nil {
		return nil, fmt.Errorf("read the login's roles: %w", err)
	}
	held, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("read the login's roles: %w", err)
	}
	if slices.Contains(held, "superuser") {
		return []string{"superuser"}, nil
	}
	return held, nil
}

// pgRows reads an extended-protocol result as text.
type pgRows struct {
	rows *pgconn.ResultReader
	err  error
}

func (r *pgRows) Next() bool {
	if r.rows.NextRow() {
		return true
	}
	_, r.err = r.rows.Close()
	return false
}

func (r *pgRows) Err() error {
	var pe *pgconn.PgError
	if errors.As(r.err, &pe) && strings.HasPrefix(pe.Code, "28") {
		return &Error{Reason: ReasonAuth, Err: r.err}
	}
	return r.err
}

func (r *pgRows) Values() ([]*string, error) {
	raw := r.rows.Values()
	out := make([]*string, len(raw))
	for i, b := range raw {
		if b != nil {
			s := string(b)
			out[i] = &s
		}
	}
	return out, nil
}

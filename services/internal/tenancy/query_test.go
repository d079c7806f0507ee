package tenancy

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckQuery(t *testing.T) {
	for _, c := range []struct {
		kind, query string
		refused     string // "" accepted; else a part of the reason
	}{
		{SourcePostgres, "SELECT id, url, active FROM tenants", ""},
		{SourcePostgres, "select id,url,active from tenants where active = 'x;y' ;", ""},
		{SourcePostgres, "WITH t AS (SELECT * FROM tenants) SELECT id, url, active FROM t", ""},
		{SourcePostgres, "(SELECT 1 AS id)", ""},
		{SourcePostgres, `SELECT "update", "share" FROM tenants -- ; DROP TABLE x`, ""},
		{SourcePostgres, "SELECT $$a;b$$ AS id, $x$ ; $x$ AS url", ""},
		{SourcePostgres, "SELECT E'it\\'s;' AS id /* a /* nested ; */ comment */", ""},
		{SourceMySQL, "SELECT `update`, 'it\\'s;' AS id FROM tenants # ; DELETE", ""},
		{SourceMySQL, "SELECT 1--1 AS id", ""},
		{SourcePostgres, "SELECT id,url,active FROM tenants; COMMIT; INSERT INTO proof(note) VALUES ('x'); SELECT 1", "more than one statement"},
		{SourcePostgres, "SELECT 1; DROP TABLE pwn", "more than one statement"},
		{SourceMySQL, "SELECT 1 --1 ; DELETE FROM t", "more than one statement"},
		{SourcePostgres, "SELECT 'a\\'; DELETE FROM t; --'", "more than one statement"},
		{SourcePostgres, "DELETE FROM tenants", "starts with DELETE"},
		{SourcePostgres, "  ", "empty"},
		{SourcePostgres, "-- nothing", "empty"},
		{SourcePostgres, "WITH d AS (DELETE FROM tenants RETURNING *) SELECT * FROM d", "contains DELETE"},
		{SourcePostgres, "SELECT * INTO copy FROM tenants", "contains INTO"},
		{SourcePostgres, "SELECT * FROM tenants FOR UPDATE", "contains UPDATE"},
		{SourcePostgres, "SELECT pg_read_file('/etc/passwd') AS id", "PG_READ_FILE"},
		{SourcePostgres, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity", "PG_TERMINATE_BACKEND"},
		{SourcePostgres, "SELECT set_config('default_transaction_read_only', 'off', false)", "SET_CONFIG"},
		{SourcePostgres, "SELECT query_to_xml('delete from t', true, true, '')", "QUERY_TO_XML"},
		{SourceMySQL, "SELECT LOAD_FILE('/etc/passwd') AS id", "LOAD_FILE"},
		{SourceMySQL, "SELECT * FROM t INTO OUTFILE '/tmp/x'", "INTO"},
		{SourceMySQL, "SELECT * FROM t LOCK IN SHARE MODE", "LOCK"},
		{SourceMySQL, "SELECT 1 /*! ; DELETE FROM t */", "executable comment"},
		{SourcePostgres, "SELECT 'unterminated", "unterminated"},
		{SourcePostgres, "SELECT 1 /* unterminated", "unterminated"},
		{SourcePostgres, "SELECT $a$ unterminated", "unterminated"},
		{SourcePostgres, "SELECT 1\x00", "NUL"},
		{SourcePostgres, "VALUES (1)", "starts with VALUES"},
		{SourcePostgres, "WITH x AS (VALUES (1)) TABLE x", "no SELECT"},
	} {
		err := CheckQuery(c.kind, c.query)
		switch {
		case c.refused == "" && err != nil:
			t.Errorf("%s %q refused: %v", c.kind, c.query, err)
		case c.refused != "" && (err == nil || !errors.Is(err, ErrQueryRefused) || !strings.Contains(err.Error(), c.refused)):
			t.Errorf("%s %q: %v, want a refusal with %q", c.kind, c.query, err, c.refused)
		}
	}
}

// FuzzCheckQuery: any text is checked without a panic; a query the check
// accepts stays accepted or is refused as more than one statement when a
// second statement follows it, whatever the quoting; what it accepts
// starts with SELECT or WITH.
func FuzzCheckQuery(f *testing.F) {
	for _, s := range []string{
		"SELECT id, url, active FROM tenants",
		"SELECT 'a;b' AS id",
		"SELECT $$x$$",
		"SELECT E'\\''",
		"SELECT `a` # c",
		"SELECT 1 /* /* */ */",
		"WITH t AS (SELECT 1) SELECT * FROM t",
		"SELECT id FROM t; COMMIT; INSERT INTO p VALUES (1)",
	} {
		f.Add(SourcePostgres, s)
		f.Add(SourceMySQL, s)
	}
	f.Fuzz(func(t *testing.T, kind, q string) {
		if kind != SourceMySQL {
			kind = SourcePostgres
		}
		if CheckQuery(kind, q) != nil {
			return
		}
		toks, err := lexSQL(kind, q)
		if err != nil {
			t.Fatalf("accepted %q but it does not lex: %v", q, err)
		}
		if i := firstWord(toks); i < 0 || (toks[i] != "select" && toks[i] != "with") {
			t.Fatalf("accepted %q starting with %v", q, toks)
		}
		// A second statement after an accepted one, on a fresh line (the
		// first may end in a line comment), is never accepted.
		if CheckQuery(kind, q+"\n; DELETE FROM t") == nil {
			t.Fatalf("accepted %q followed by a DELETE", q)
		}
	})
}

func firstWord(toks []string) int {
	for i, t := range toks {
		if t != "(" {
			return i
		}
	}
	return -1
}

package tenancy

import (
	"errors"
	"fmt"
	"strings"
)

// ErrQueryRefused is matched (errors.Is) by every query CheckQuery refuses.
var ErrQueryRefused = errors.New("the query is refused")

// refusedWords are the words a registry query may not contain outside
// strings and quoted identifiers: statements and clauses that write, lock
// or run other text (INTO: SELECT INTO, INTO OUTFILE), and the functions
// that read or signal outside the database or run SQL text of their own.
// The datasource's own rules are the guard (one statement by the protocol,
// a READ ONLY transaction on a read-only session, a login without
// privileges); this list gives admission's early, named refusal.
var refusedWords = map[string]bool{
	"insert": true, "update": true, "delete": true, "merge": true, "upsert": true, "into": true,
	"copy": true, "call": true, "do": true, "execute": true, "exec": true, "prepare": true,
	"truncate": true, "drop": true, "alter": true, "create": true, "grant": true, "revoke": true,
	"lock": true, "share": true, "commit": true, "rollback": true, "begin": true, "savepoint": true,
	"set": true, "reset": true, "load": true, "handler": true, "outfile": true, "dumpfile": true,
	"pg_read_file": true, "pg_read_binary_file": true, "pg_ls_dir": true, "pg_stat_file": true,
	"pg_terminate_backend": true, "pg_cancel_backend": true, "pg_reload_conf": true, "pg_rotate_logfile": true,
	"pg_logical_emit_message": true, "set_config": true, "lo_import": true, "lo_export": true,
	"lo_from_bytea": true, "lo_put": true, "dblink": true, "dblink_exec": true, "dblink_connect": true,
	"query_to_xml": true, "query_to_xmlschema": true, "query_to_xml_and_xmlschema": true, "cursor_to_xml": true,
	"load_file": true, "sys_exec": true, "sys_eval": true,
}

// CheckQuery checks a registry's query for the datasource type kind
// (SourceMySQL or SourcePostgres) before it is stored and again before it
// runs: one statement (a ';' only at the very end), starting with SELECT or
// WITH (after any opening parentheses), with none of refusedWords outside
// strings, quoted identifiers and comments, and, for MySQL, no executable
// comment (/*! … */, which MySQL runs). A quoted identifier of a refused
// word ("update", `share`) is fine. The error wraps ErrQueryRefused and
// says why.
func CheckQuery(kind, text string) error {
	toks, err := lexSQL(kind, text)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrQueryRefused, err)
	}
	for i, t := range toks {
		if t == ";" && i != len(toks)-1 {
			return fmt.Errorf("%w: it holds more than one statement (a ';' before its end): a registry query is one SELECT", ErrQueryRefused)
		}
	}
	if len(toks) > 0 && toks[len(toks)-1] == ";" {
		toks = toks[:len(toks)-1]
	}
	first := ""
	for _, t := range toks {
		if t != "(" {
			first = t
			break
		}
	}
	if first != "select" && first != "with" {
		if first == "" {
			return fmt.Errorf("%w: it is empty", ErrQueryRefused)
		}
		return fmt.Errorf("%w: it starts with %s: a registry query is one SELECT or WITH … SELECT", ErrQueryRefused, strings.ToUpper(first))
	}
	hasSelect := false
	for _, t := range toks {
		if refusedWords[t] {
			return fmt.Errorf("%w: it contains %s: a registry query only reads (quote an identifier of that name)", ErrQueryRefused, strings.ToUpper(t))
		}
		hasSelect = hasSelect || t == "select"
	}
	if !hasSelect {
		return fmt.Errorf("%w: it has no SELECT", ErrQueryRefused)
	}
	return nil
}

// lexSQL splits text into lower-cased unquoted words and one-character
// punctuation, dropping whitespace, comments, strings and quoted
// identifiers (each becomes the token "'"). It knows both dialects'
// quoting: '…' with ” (and backslash escapes in MySQL and in PostgreSQL's
// E'…'), "…" (an identifier in PostgreSQL, a string in MySQL), `…`
// (MySQL), $tag$…$tag$ (PostgreSQL), -- and /* */ comments (nested in
// PostgreSQL), # comments in MySQL. An unterminated string or comment, a
// NUL or an executable MySQL comment is an error.
func lexSQL(kind, s string) ([]string, error) {
	mysql := kind == SourceMySQL
	var toks []string
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == 0:
			return nil, errors.New("it contains a NUL byte")
		case isSQLSpace(c):
			i++
		case startsLineComment(s[i:], mysql):
			end := strings.IndexByte(s[i:], '\n')
			if end < 0 {
				return toks, nil
			}
			i += end + 1
		case strings.HasPrefix(s[i:], "/*"):
			n, err := skipBlockComment(s[i:], mysql)
			if err != nil {
				return nil, err
			}
			i += n
		case c == '\'' || c == '"' || (mysql && c == '`'):
			var n int
			var err error
			if toks, n, err = lexQuoted(toks, s, i, mysql); err != nil {
				return nil, err
			}
			i += n
		case !mysql && c == '$' && dollarTag(s[i:]) != "":
			n, err := dollarQuoted(s[i:])
			if err != nil {
				return nil, err
			}
			toks = append(toks, "'")
			i += n
		case isWordByte(c):
			j := wordEnd(s, i)
			toks = append(toks, strings.ToLower(s[i:j]))
			i = j
		default:
			toks = append(toks, string(c))
			i++
		}
	}
	return toks, nil
}

func isSQLSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// startsLineComment: s starts with a -- comment, or a # one in MySQL.
// MySQL's -- starts a comment only before a blank or a control character
// (1--1 is one minus minus one).
func startsLineComment(s string, mysql bool) bool {
	if mysql && s[0] == '#' {
		return true
	}
	return strings.HasPrefix(s, "--") && (!mysql || len(s) == 2 || s[2] <= ' ')
}

// skipBlockComment is the length of the /* … */ comment at the start of
// s (nested in PostgreSQL); MySQL's executable comments are refused.
func skipBlockComment(s string, mysql bool) (int, error) {
	if mysql && (strings.HasPrefix(s, "/*!") || strings.HasPrefix(s, "/*M!")) {
		return 0, errors.New("it contains an executable comment (/*! … */)")
	}
	return blockComment(s, !mysql)
}

// lexQuoted reads the string or quoted identifier that s[i] opens: it
// appends the token "'" to toks (an E'…' string's prefix e dropped) and
// returns the length read.
func lexQuoted(toks []string, s string, i int, mysql bool) ([]string, int, error) {
	c := s[i]
	backslash := mysql && c != '`'
	if !mysql && c == '\'' && i > 0 && (s[i-1] == 'e' || s[i-1] == 'E') && len(toks) > 0 && (toks[len(toks)-1] == "e") {
		// E'…': the word e was this string's prefix.
		toks = toks[:len(toks)-1]
		backslash = true
	}
	n, err := quoted(s[i:], c, backslash)
	if err != nil {
		return nil, 0, err
	}
	return append(toks, "'"), n, nil
}

// dollarQuoted is the length of the PostgreSQL $tag$…$tag$ string at the
// start of s.
func dollarQuoted(s string) (int, error) {
	tag := dollarTag(s)
	end := strings.Index(s[len(tag):], tag)
	if end < 0 {
		return 0, errors.New("it has an unterminated dollar-quoted string")
	}
	return len(tag) + end + len(tag), nil
}

// wordEnd is the index after the word that starts at s[i] (a $ may follow
// its first byte).
func wordEnd(s string, i int) int {
	j := i
	for j < len(s) && (isWordByte(s[j]) || s[j] == '$') {
		j++
	}
	return j
}

// isWordByte: letters, digits, '_' and every byte of a multibyte UTF-8
// character (identifiers may hold them).
func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c >= 0x80
}

// blockComment is the length of the /* … */ comment at the start of s
// (nested when nested is set).
func blockComment(s string, nested bool) (int, error) {
	depth := 0
	for i := 0; i+1 < len(s); i++ {
		switch {
		case s[i] == '/' && s[i+1] == '*':
			if depth == 0 || nested {
				depth++
			}
			i++
		case s[i] == '*' && s[i+1] == '/':
			depth--
			i++
			if depth == 0 {
				return i + 1, nil
			}
		}
	}
	return 0, errors.New("it has an unterminated comment")
}

// quoted is the length of the string or quoted identifier at the start of
// s, opened and closed by q (a doubled q is one q; a backslash escapes the
// next byte when backslash is set).
func quoted(s string, q byte, backslash bool) (int, error) {
	for i := 1; i < len(s); i++ {
		switch {
		case backslash && s[i] == '\\':
			i++
		case s[i] == q && i+1 < len(s) && s[i+1] == q:
			i++
		case s[i] == q:
			return i + 1, nil
		}
	}
	return 0, errors.New("it has an unterminated string or quoted identifier")
}

// dollarTag is the $tag$ opening a PostgreSQL dollar-quoted string at the
// start of s, or "" ($1 is a parameter, not a tag).
func dollarTag(s string) string {
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '$':
			return s[:i+1]
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c >= 0x80 || (i > 1 && c >= '0' && c <= '9'):
		default:
			return ""
		}
	}
	return ""
}

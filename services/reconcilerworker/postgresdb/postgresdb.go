// Package postgresdb is the PostgresDatabase reconciler: for each
// PostgresDatabase/v1 resource it keeps a database and its owner role on a
// target PostgreSQL server.
//
//	{"database": "orders", "owner": "orders_owner", "deletionPolicy": "Delete",
//	 "connection": {"env": "ORDERS_PG_ADMIN_URL"}}
//
// The connection is a secret reference ({"env": "NAME"} or {"file": "/path"})
// to a PostgreSQL URL of a role allowed to create databases and roles,
// resolved by the worker from its own environment or files: the spec never
// carries the URL. Steps, in order:
//
//   - role: the owner role exists (CREATE ROLE ... NOLOGIN when missing; it
//     has no password: grant it to login roles or set one out of band);
//   - database: the database exists and is owned by the role (CREATE
//     DATABASE when missing, ALTER DATABASE ... OWNER TO when the owner
//     drifted). Every attempt looks at the server afresh, so a database
//     dropped by hand is recreated at the next resync.
//
// Outputs: host, port, database, role (never a password). On deletion with
// deletionPolicy Delete (the default) the database is dropped (WITH
// (FORCE)), then the role unless it still owns another database; with Retain
// both are kept. Databases and roles this reconciler creates carry a comment
// naming the resource's uid: it never drops what it did not create, and it
// refuses (terminal error) to take over a database that exists already
// without its comment.
package postgresdb

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/no8s/no8s/libs/platform/secret"
	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/libs/sdk/conditions"
)

// Name is the reconciler's registered name; its finalizer is
// reconciler.no8s.io/postgres-database.
const Name = "postgres-database"

// Type is the resource type it serves.
var Type = sdk.Type("PostgresDatabase", "v1")

// Condition types.
const (
	CondRole     = "RoleReady"
	CondDatabase = "DatabaseReady"
)

// Deletion policies.
const (
	PolicyDelete = "Delete"
	PolicyRetain = "Retain"
)

// Spec is a PostgresDatabase's spec.
type Spec struct {
	// Database is the database's name.
	Database string `json:"database"`
	// Owner is the owner role's name.
	Owner string `json:"owner"`
	// DeletionPolicy is Delete (default) or Retain.
	DeletionPolicy string `json:"deletionPolicy"`
	// Connection references a PostgreSQL URL with the rights to create
	// databases and roles.
	Connection secret.Ref `json:"connection"`
}

// Schema is the PostgresDatabase/v1 schema (OpenAPI v3).
const Schema = `{
  "type": "object",
  "required": ["database", "owner", "connection"],
  "additionalProperties": false,
  "properties": {
    "database": {"type": "string", "pattern": "^[a-z_][a-z0-9_]{0,62}$", "description": "database name"},
    "owner": {"type": "string", "pattern": "^[a-z_][a-z0-9_]{0,62}$", "description": "owner role name"},
    "deletionPolicy": {"type": "string", "enum": ["Delete", "Retain"], "default": "Delete",
      "description": "Delete drops the database and the role when the resource is deleted; Retain keeps them"},
    "connection": {
      "type": "object", "minProperties": 1, "maxProperties": 1, "additionalProperties": false,
      "description": "secret reference to a PostgreSQL URL, resolved by the reconciler: {\"env\": \"NAME\"} or {\"file\": \"/path\"}",
      "properties": {"env": {"type": "string", "minLength": 1}, "file": {"type": "string", "minLength": 1}}
    }
  }
}`

// Description is the type's description.
const Description = "A database and its owner role on a PostgreSQL server (no8s-reconciler postgres-database)"

var identRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// reserved are names the reconciler never manages.
var reserved = map[string]bool{"postgres": true, "template0": true, "template1": true, "public": true}

// New returns the reconciler.
func New() *sdk.Engine[Spec] {
	return sdk.New[Spec](Name, connection{}, roleStep{}, databaseStep{}).WithConditions(CondRole, CondDatabase)
}

func (s Spec) policy() string {
	if s.DeletionPolicy == "" {
		return PolicyDelete
	}
	return s.DeletionPolicy
}

func (s Spec) validate() error {
	for _, f := range []struct{ path, v string }{{"database", s.Database}, {"owner", s.Owner}} {
		if !identRE.MatchString(f.v) {
			return sdk.Terminalf("spec.%s %q: want a lower-case identifier (a-z, 0-9, _; at most 63)", f.path, f.v)
		}
		if reserved[f.v] || strings.HasPrefix(f.v, "pg_") {
			return sdk.Terminalf("spec.%s %q is reserved", f.path, f.v)
		}
	}
	if p := s.policy(); p != PolicyDelete && p != PolicyRetain {
		return sdk.Terminalf("spec.deletionPolicy %q: want Delete or Retain", p)
	}
	if s.Connection.IsZero() {
		return sdk.Terminalf("spec.connection is required: {\"env\": \"NAME\"} or {\"file\": \"/path\"}")
	}
	return nil
}

// marker is the comment put on what this resource created.
func marker(req *sdk.Request[Spec]) string { return "no8s:" + req.Resource.UID }

const connKey = "postgresdb.conn"

// conn opens the admin connection once per attempt (the connection step's
// Post closes it).
func conn(ctx context.Context, req *sdk.Request[Spec]) (*pgx.Conn, error) {
	if c, ok := sdk.Lookup[*pgx.Conn](req, connKey); ok {
		return c, nil
	}
	v, err := req.Secret(ctx, req.Spec.Connection)
	if err != nil {
		return nil, err
	}
	cfg, err := pgx.ParseConfig(v.Reveal())
	if err != nil {
		// The parse error may quote the URL: never pass it on.
		return nil, sdk.Terminalf("connection %s is not a valid PostgreSQL URL", req.Spec.Connection)
	}
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to %s:%d: %w", cfg.Host, cfg.Port, err)
	}
	req.Scratch[connKey] = c
	return c, nil
}

// connection validates the spec and closes the connection after the other
// steps.
type connection struct{}

func (connection) Name() string { return "connection" }

func (connection) Do(_ context.Context, req *sdk.Request[Spec]) (sdk.Result, error) {
	return sdk.Result{}, req.Spec.validate()
}

func (connection) Cleanup(_ context.Context, req *sdk.Request[Spec]) (sdk.Result, error) {
	return sdk.Result{}, nil
}

func (connection) Post(ctx context.Context, req *sdk.Request[Spec]) error {
	if c, ok := sdk.Lookup[*pgx.Conn](req, connKey); ok {
		_ = c.Close(context.WithoutCancel(ctx))
		delete(req.Scratch, connKey)
	}
	return nil
}

// roleStep keeps the owner role.
type roleStep struct{}

func (roleStep) Name() string { return "role" }

func (roleStep) Do(ctx context.Context, req *sdk.Request[Spec]) (sdk.Result, error) {
	c, err := conn(ctx, req)
	if err != nil {
		req.MarkFalse(CondRole, "NoConnection", err.Error())
		return sdk.Result{}, err
	}
	owner := req.Spec.Owner
	ident := pgx.Identifier{owner}.Sanitize()
	_, found, err := comment(ctx, c, `SELECT shobj_description(oid, 'pg_authid') FROM pg_roles WHERE rolname = $1`, owner)
	if err != nil {
		return sdk.Result{}, err
	}
	switch {
	case !found:
		if _, err := c.Exec(ctx, "CREATE ROLE "+ident+" NOLOGIN"); err != nil && !isCode(err, "42710") { // duplicate_object: created meanwhile
			req.MarkFalse(CondRole, "CreateFailed", err.Error())
			return sdk.Result{}, fmt.Errorf("create role %s: %w", owner, err)
		}
		if _, err := c.Exec(ctx, "COMMENT ON ROLE "+ident+" IS "+quote(marker(req))); err != nil {
			return sdk.Result{}, fmt.Errorf("comment on role %s: %w", owner, err)
		}
		req.Changes.Created++
		req.Log.Info("role created", "role", owner)
		req.MarkTrue(CondRole, "Created", "role "+owner+" created")
	default:
		// An existing role may be shared by several databases: use it.
		req.MarkTrue(CondRole, "Exists", "role "+owner+" exists")
	}
	return sdk.Result{}, nil
}

func (roleStep) Cleanup(ctx context.Context, req *sdk.Request[Spec]) (sdk.Result, error) {
	if req.Spec.policy() == PolicyRetain {
		return sdk.Result{}, nil
	}
	c, err := conn(ctx, req)
	if err != nil {
		return sdk.Result{}, err
	}
	owner := req.Spec.Owner
	cm, found, err := comment(ctx, c, `SELECT shobj_description(oid, 'pg_authid') FROM pg_roles WHERE rolname = $1`, owner)
	if err != nil || !found {
		return sdk.Result{}, err
	}
	if cm != marker(req) {
		req.Log.Info("keeping role: this resource did not create it", "role", owner)
		return sdk.Result{}, nil
	}
	var owned int
	if err := c.QueryRow(ctx, `SELECT count(*) FROM pg_database WHERE datdba = (SELECT oid FROM pg_roles WHERE rolname = $1)`, owner).Scan(&owned); err != nil {
		return sdk.Result{}, err
	}
	if owned > 0 {
		req.Log.Info("keeping role: it owns other databases", "role", owner, "databases", owned)
		return sdk.Result{}, nil
	}
	if _, err := c.Exec(ctx, "DROP ROLE IF EXISTS "+pgx.Identifier{owner}.Sanitize()); err != nil {
		return sdk.Result{}, fmt.Errorf("drop role %s: %w", owner, err)
	}
	req.Changes.Deleted++
	req.Log.Info("role dropped", "role", owner)
	return sdk.Result{}, nil
}

// databaseStep keeps the database.
type databaseStep struct{}

func (databaseStep) Name() string { return "database" }

func (databaseStep) Do(ctx context.Context, req *sdk.Request[Spec]) (sdk.Result, error) {
	c, err := conn(ctx, req)
	if err != nil {
		req.MarkFalse(CondDatabase, "NoConnection", err.Error())
		return sdk.Result{}, err
	}
	db, owner := req.Spec.Database, req.Spec.Owner
	ident, ownerIdent := pgx.Identifier{db}.Sanitize(), pgx.Identifier{owner}.Sanitize()
	var curOwner string
	var cm *string
	err = c.QueryRow(ctx, `SELECT pg_get_userbyid(datdba), shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = $1`, db).Scan(&curOwner, &cm)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		if _, err := c.Exec(ctx, "CREATE DATABASE "+ident+" OWNER "+ownerIdent); err != nil && !isCode(err, "42P04") { // duplicate_database
			req.MarkFalse(CondDatabase, "CreateFailed", err.Error())
			return sdk.Result{}, fmt.Errorf("create database %s: %w", db, err)
		}
		if _, err := c.Exec(ctx, "COMMENT ON DATABASE "+ident+" IS "+quote(marker(req))); err != nil {
			return sdk.Result{}, fmt.Errorf("comment on database %s: %w", db, err)
		}
		req.Changes.Created++
		reason := "Created"
		if conditions.IsTrue(req.Resource.Conditions, CondDatabase) {
			// An earlier attempt saw it (observed_generation alone does not
			// tell: failed attempts set it too): drift.
			reason = "Recreated"
		}
		req.Log.Info("database created", "database", db, "reason", reason)
		req.MarkTrue(CondDatabase, reason, "database "+db+" created")
	case err != nil:
		return sdk.Result{}, fmt.Errorf("look up database %s: %w", db, err)
	case cm == nil || *cm != marker(req):
		req.MarkFalse(CondDatabase, "NotManaged", "database "+db+" exists and was not created by this resource")
		return sdk.Result{}, sdk.Terminalf("database %s already exists and was not created by this resource: choose another name or drop it", db)
	default:
		if curOwner != owner || req.Force {
			if _, err := c.Exec(ctx, "ALTER DATABASE "+ident+" OWNER TO "+ownerIdent); err != nil {
				req.MarkFalse(CondDatabase, "OwnerFailed", err.Error())
				return sdk.Result{}, fmt.Errorf("set owner of %s: %w", db, err)
			}
			if curOwner != owner {
				req.Changes.Updated++
				req.Log.Info("database owner corrected", "database", db, "was", curOwner, "owner", owner)
			}
		}
		req.MarkTrue(CondDatabase, "Exists", "database "+db+" exists, owned by "+owner)
	}
	cfg := c.Config()
	req.SetOutput("host", cfg.Host)
	req.SetOutput("port", int(cfg.Port))
	req.SetOutput("database", db)
	req.SetOutput("role", owner)
	return sdk.Result{}, nil
}

func (databaseStep) Cleanup(ctx context.Context, req *sdk.Request[Spec]) (sdk.Result, error) {
	db := req.Spec.Database
	if req.Spec.policy() == PolicyRetain {
		req.Log.Info("deletion policy Retain: keeping the database and its role", "database", db)
		return sdk.Result{}, nil
	}
	c, err := conn(ctx, req)
	if err != nil {
		return sdk.Result{}, err
	}
	cm, found, err := comment(ctx, c, `SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = $1`, db)
	if err != nil || !found {
		return sdk.Result{}, err
	}
	if cm != marker(req) {
		req.Log.Info("keeping database: this resource did not create it", "database", db)
		return sdk.Result{}, nil
	}
	if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{db}.Sanitize()+" WITH (FORCE)"); err != nil {
		return sdk.Result{}, fmt.Errorf("drop database %s: %w", db, err)
	}
	req.Changes.Deleted++
	req.Log.Info("database dropped", "database", db)
	return sdk.Result{}, nil
}

// comment runs a one-row query answering a nullable comment.
func comment(ctx context.Context, c *pgx.Conn, query, name string) (string, bool, error) {
	var cm *string
	err := c.QueryRow(ctx, query, name).Scan(&cm)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	if cm == nil {
		return "", true, nil
	}
	return *cm, true, nil
}

func isCode(err error, code string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == code
}

// quote makes a string literal (the markers hold a uuid and letters only).
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

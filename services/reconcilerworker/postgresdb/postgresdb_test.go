package postgresdb

import (
	"encoding/json"
	"testing"

	"github.com/no8s/no8s/libs/platform/secret"
	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/services/admission/schema"
)

// The registered schema compiles, applies the default policy and refuses a
// URL where a secret reference belongs.
func TestSchema(t *testing.T) {
	s, err := schema.Compile([]byte(Schema))
	if err != nil {
		t.Fatal(err)
	}
	spec, violations, err := s.Admit([]byte(`{"database":"orders","owner":"orders_owner","connection":{"env":"PG_URL"}}`))
	if err != nil || len(violations) > 0 {
		t.Fatalf("%v %v", violations, err)
	}
	var got Spec
	if err := json.Unmarshal(spec, &got); err != nil || got.DeletionPolicy != PolicyDelete || got.Connection != secret.Env("PG_URL") {
		t.Fatalf("%s %v", spec, err)
	}
	for _, bad := range []string{
		`{"database":"orders","owner":"o","connection":"postgres://postgres:secret@db/postgres"}`,
		`{"database":"orders","owner":"o","connection":{"env":"A","file":"/b"}}`,
		`{"database":"Orders; DROP","owner":"o","connection":{"env":"A"}}`,
		`{"database":"orders","owner":"o","connection":{"env":"A"},"deletionPolicy":"Keep"}`,
	} {
		if _, violations, err := s.Admit([]byte(bad)); err == nil && len(violations) == 0 {
			t.Errorf("admitted %s", bad)
		}
	}
}

func TestValidate(t *testing.T) {
	ok := Spec{Database: "orders", Owner: "orders_owner", Connection: secret.Env("PG_URL")}
	if err := ok.validate(); err != nil {
		t.Fatal(err)
	}
	for _, s := range []Spec{
		{Database: "postgres", Owner: "o", Connection: secret.Env("X")},
		{Database: "pg_x", Owner: "o", Connection: secret.Env("X")},
		{Database: "d", Owner: "Bad-Name", Connection: secret.Env("X")},
		{Database: "d", Owner: "o"},
		{Database: "d", Owner: "o", Connection: secret.Env("X"), DeletionPolicy: "Keep"},
	} {
		if err := s.validate(); !sdk.IsTerminal(err) {
			t.Errorf("%+v: %v, want a terminal error", s, err)
		}
	}
}

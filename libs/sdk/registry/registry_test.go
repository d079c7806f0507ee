package registry_test

import (
	"errors"
	"testing"

	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/libs/sdk/registry"
)

// Registration against a real JetStream is tested in the test kit module
// (TestRegistration, TestRegistryHeartbeatExpiry).

func TestNamesAndKeys(t *testing.T) {
	for _, ok := range []string{"noop", "postgres-database", "a1"} {
		if err := registry.ValidName(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "Noop", "-x", "x-", "a.b", "a/b", "a b"} {
		if err := registry.ValidName(bad); !errors.Is(err, registry.ErrInvalid) {
			t.Errorf("%q accepted", bad)
		}
	}
	if err := registry.ValidType(sdk.Type("PostgresDatabase", "v1beta2")); err != nil {
		t.Error(err)
	}
	for _, bad := range []sdk.TypeRef{sdk.Type("postgres", "v1"), sdk.Type("Pg", "1"), sdk.Type("Pg.X", "v1")} {
		if err := registry.ValidType(bad); !errors.Is(err, registry.ErrInvalid) {
			t.Errorf("%v accepted", bad)
		}
	}
}

package pgstore_test

import (
	"testing"

	"github.com/no8s/no8s/services/internal/strictjson"
)

// strictjson.Expand writes numbers exactly as PostgreSQL's jsonb reads them
// back, and the store keeps accepting what it returned.
func TestExpandMatchesPostgreSQL(t *testing.T) {
	pool := newPool(t)
	for _, lit := range []string{
		"1e2", "1.50e1", "1.5e-3", "-0", "-0.00", "0e5", "1E+2", "12.3400e-1", "0.000e3", "1e-5", "100e-2", "-12.5",
		"1e300", "-1.7976931348623157e308", "5e-324", "2.5e-5", "123456789012345678901234567890.0001", "0e-900",
	} {
		if !strictjson.NumberOK(lit) {
			t.Fatalf("%s refused", lit)
		}
		var got string
		if err := pool.QueryRow(t.Context(), `SELECT ($1::text)::jsonb::text`, lit).Scan(&got); err != nil {
			t.Fatalf("%s: %v", lit, err)
		}
		if want := strictjson.Expand(lit); got != want {
			t.Errorf("PostgreSQL writes %s as %.60s, Expand as %.60s", lit, got, want)
		}
		if !strictjson.NumberOK(got) {
			t.Errorf("the stored form of %s is refused", lit)
		}
	}
}

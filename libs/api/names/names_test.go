package names

import (
	"strings"
	"testing"
)

func TestName(t *testing.T) {
	for _, ok := range []string{"a", "pg-1", strings.Repeat("a", 63)} {
		if fe := Name("/name", ok); fe != nil {
			t.Errorf("%q refused: %s", ok, fe.Message)
		}
	}
	for _, bad := range []string{"", "A", "-a", "a-", "a_b", "a.b", strings.Repeat("a", 64)} {
		if fe := Name("/name", bad); fe == nil || fe.Path != "/name" {
			t.Errorf("%q accepted (%v)", bad, fe)
		}
	}
}

func TestTypes(t *testing.T) {
	if TypeName("/t", "PostgresDatabase") != nil || TypeVersion("/v", "v1beta2") != nil {
		t.Error("valid type refused")
	}
	for _, bad := range []string{"postgres", "Pg.X", "Pg-1", ""} {
		if TypeName("/t", bad) == nil {
			t.Errorf("type %q accepted", bad)
		}
	}
	for _, bad := range []string{"1", "v", "V1", "v1gamma1"} {
		if TypeVersion("/v", bad) == nil {
			t.Errorf("version %q accepted", bad)
		}
	}
}

func TestKeysValuesFinalizers(t *testing.T) {
	for _, ok := range []string{"app", "example.com/app", "a_b.c-d"} {
		if fe := QualifiedKey("/k", ok); fe != nil {
			t.Errorf("key %q refused: %s", ok, fe.Message)
		}
	}
	for _, bad := range []string{"", "/app", "Example.com/app", "a/b/c", "-a", strings.Repeat("a", 64)} {
		if QualifiedKey("/k", bad) == nil {
			t.Errorf("key %q accepted", bad)
		}
	}
	if LabelValue("/v", "") != nil || LabelValue("/v", "x.y_z") != nil || LabelValue("/v", "-x") == nil {
		t.Error("label values")
	}
	if fe := Finalizer("/f", ReconcilerFinalizer("postgres-database")); fe != nil {
		t.Error(fe.Message)
	}
	if Finalizer("/f", "a b") == nil || Finalizer("/f", strings.Repeat("a", MaxFinalizerLength+1)) == nil {
		t.Error("bad finalizer accepted")
	}
	for _, ok := range []string{"github_actions", "example.com/cleanup"} {
		if fe := DeclaredFinalizer("/f", ok); fe != nil {
			t.Errorf("declared finalizer %q refused: %s", ok, fe.Message)
		}
	}
	for _, bad := range []string{"", "a b", ReconcilerFinalizer("other")} {
		if DeclaredFinalizer("/f", bad) == nil {
			t.Errorf("declared finalizer %q accepted", bad)
		}
	}
	if DNSSubdomain("/name", "policy.example.com") != nil || DNSSubdomain("/name", "Policy") == nil || DNSSubdomain("/name", "") == nil {
		t.Error("subdomains")
	}
}

func TestNamespace(t *testing.T) {
	for _, ok := range []string{"default", "team-a", "a", strings.Repeat("n", 63)} {
		if fe := Namespace("/namespace", ok); fe != nil {
			t.Errorf("%q refused: %s", ok, fe.Message)
		}
	}
	for _, bad := range []string{"", "Team", "-a", "a-", "a_b", "a.b", strings.Repeat("n", 64)} {
		if fe := Namespace("/namespace", bad); fe == nil || fe.Path != "/namespace" {
			t.Errorf("%q accepted (%v)", bad, fe)
		}
	}
	if OrDefault("") != DefaultNamespace || OrDefault("x") != "x" {
		t.Error("OrDefault")
	}
}

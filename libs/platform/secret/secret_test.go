package secret_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/no8s/no8s/libs/platform/secret"
)

func TestRefJSON(t *testing.T) {
	var spec struct {
		Password secret.Ref `json:"password"`
		Other    secret.Ref `json:"other"`
	}
	if err := json.Unmarshal([]byte(`{"password":{"env":"PG_PASS"},"other":null}`), &spec); err != nil {
		t.Fatal(err)
	}
	if spec.Password != secret.Env("PG_PASS") || !spec.Other.IsZero() {
		t.Fatalf("%+v", spec)
	}
	b, _ := json.Marshal(secret.File("/run/s"))
	if string(b) != `{"file":"/run/s"}` {
		t.Fatalf("%s", b)
	}
	for _, bad := range []string{`"x"`, `{}`, `{"env":"A","file":"/b"}`, `{"env":1}`, `{"env":""}`} {
		var r secret.Ref
		if err := json.Unmarshal([]byte(bad), &r); !errors.Is(err, secret.ErrInvalidRef) {
			t.Errorf("%s: err %v", bad, err)
		}
	}
}

func TestLocalEnv(t *testing.T) {
	env := map[string]string{"APP_PASS": "hunter2", "HOME": "/root"}
	l := secret.Local{LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
	v, err := l.Resolve(context.Background(), secret.Env("APP_PASS"))
	if err != nil || v.Reveal() != "hunter2" {
		t.Fatalf("%v %q", err, v.Reveal())
	}
	_, err = l.Resolve(context.Background(), secret.Env("MISSING"))
	if !errors.Is(err, secret.ErrNotFound) || !strings.Contains(err.Error(), "MISSING") {
		t.Fatalf("err %v", err)
	}
	l.EnvPrefix = "APP_"
	if _, err := l.Resolve(context.Background(), secret.Env("HOME")); !errors.Is(err, secret.ErrForbidden) {
		t.Fatalf("err %v", err)
	}
}

func TestLocalFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "pw")
	if err := os.WriteFile(p, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l := secret.Local{FileDir: dir}
	v, err := l.Resolve(context.Background(), secret.File(p))
	if err != nil || v.Reveal() != "s3cret" {
		t.Fatalf("%v %q", err, v.Reveal())
	}
	if _, err := l.Resolve(context.Background(), secret.File(filepath.Join(dir, "nope"))); !errors.Is(err, secret.ErrNotFound) {
		t.Fatalf("err %v", err)
	}
	if _, err := l.Resolve(context.Background(), secret.File("/etc/hostname")); !errors.Is(err, secret.ErrForbidden) {
		t.Fatalf("err %v", err)
	}
	// A link inside the directory that points outside it is refused too.
	if err := os.Symlink("/etc/hostname", filepath.Join(dir, "link")); err == nil {
		if _, err := l.Resolve(context.Background(), secret.File(filepath.Join(dir, "link"))); !errors.Is(err, secret.ErrForbidden) {
			t.Fatalf("symlink escape: err %v", err)
		}
	}
	if _, err := l.Resolve(context.Background(), secret.File("relative/pw")); !errors.Is(err, secret.ErrInvalidRef) {
		t.Fatalf("err %v", err)
	}
}

func TestChainAndUnsupported(t *testing.T) {
	vault := secret.ResolverFunc(func(_ context.Context, ref secret.Ref) (secret.Value, error) {
		if ref.Kind != "vault" {
			return secret.Value{}, fmt.Errorf("%w", secret.ErrUnsupported)
		}
		return secret.NewValue([]byte("from-vault")), nil
	})
	r := secret.Chain(vault, secret.Local{LookupEnv: func(string) (string, bool) { return "from-env", true }})
	if v, err := r.Resolve(context.Background(), secret.Ref{Kind: "vault", Value: "kv/x"}); err != nil || v.Reveal() != "from-vault" {
		t.Fatalf("%v %v", v.Reveal(), err)
	}
	if v, err := r.Resolve(context.Background(), secret.Env("X")); err != nil || v.Reveal() != "from-env" {
		t.Fatalf("%v %v", v.Reveal(), err)
	}
	if _, err := r.Resolve(context.Background(), secret.Ref{Kind: "aws", Value: "x"}); !errors.Is(err, secret.ErrUnsupported) || !strings.Contains(err.Error(), `aws "x"`) {
		t.Fatalf("err %v", err)
	}
}

func TestValueIsRedacted(t *testing.T) {
	v := secret.NewValue([]byte("hunter2"))
	var sb strings.Builder
	log := slog.New(slog.NewTextHandler(&sb, nil))
	log.Info("resolved", "password", v)
	j, _ := json.Marshal(map[string]any{"p": v})
	for _, s := range []string{fmt.Sprint(v), fmt.Sprintf("%v %s %q %#v %x", v, v, v, v, v), sb.String(), string(j)} {
		if strings.Contains(s, "hunter2") || strings.Contains(s, "68756e") {
			t.Fatalf("secret leaked: %s", s)
		}
	}
	if v.Reveal() != "hunter2" || string(v.Bytes()) != "hunter2" || v.Len() != 7 {
		t.Fatal("Reveal/Bytes")
	}
}

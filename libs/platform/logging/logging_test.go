package logging

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestNew(t *testing.T) {
	var buf bytes.Buffer
	log, err := New(&buf, Options{})
	if err != nil {
		t.Fatal(err)
	}
	log.Debug("hidden")
	log.Info("shown", "k", "v")
	if got := buf.String(); strings.Contains(got, "hidden") || !strings.Contains(got, "msg=shown k=v") {
		t.Fatalf("text at info: %q", got)
	}
	buf.Reset()
	log, err = New(&buf, FromEnv(env{EnvFormat: "json", EnvLevel: "debug"}.get))
	if err != nil {
		t.Fatal(err)
	}
	log.Debug("d", "k", 1)
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil || m["msg"] != "d" {
		t.Fatalf("json at debug: %q %v", buf.String(), err)
	}
	for _, o := range []Options{{Format: "xml"}, {Level: "loud"}} {
		if _, err := New(&buf, o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}

type env map[string]string

func (e env) get(k string) string { return e[k] }

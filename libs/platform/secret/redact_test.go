package secret_test

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/no8s/no8s/libs/platform/secret"
)

func TestRedact(t *testing.T) {
	tok := "ghp_Ab+c/d=e\"f&g h"
	v := secret.NewValue([]byte(tok))
	j, _ := json.Marshal(tok)
	for _, form := range []string{
		tok,
		base64.StdEncoding.EncodeToString([]byte(tok)),
		base64.RawURLEncoding.EncodeToString([]byte(tok)),
		base64.StdEncoding.EncodeToString([]byte("Bearer " + tok)),
		url.QueryEscape(tok),
		url.PathEscape(tok),
		string(j),
	} {
		in := "401 Bad credentials: Bearer " + form + " (again: " + form + ")"
		out := secret.Redact(in, v)
		if strings.Contains(out, strings.Trim(form, `"=`)) || !strings.Contains(out, secret.Redacted) {
			t.Errorf("%q → %q", in, out)
		}
	}
	if got := secret.Redact("abc abc", secret.NewValue([]byte("abc"))); got != "abc abc" {
		t.Errorf("a 3-byte secret redacted: %q", got)
	}
}

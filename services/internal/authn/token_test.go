package authn

import (
	"strings"
	"testing"
)

func TestNewTokenParses(t *testing.T) {
	id, hash, tok, err := NewToken()
	if err != nil {
		t.Fatal(err)
	}
	if len(tok) != TokenLen {
		t.Fatalf("token length %d, want %d", len(tok), TokenLen)
	}
	gotID, secret, err := ParseToken(tok)
	if err != nil {
		t.Fatalf("ParseToken(%q): %v", tok, err)
	}
	if gotID != id || !ValidTokenID(id) {
		t.Fatalf("id %q, want %q", gotID, id)
	}
	if !SecretMatches(secret, hash) {
		t.Fatal("the secret does not match its hash")
	}
	if SecretMatches(secret+"x", hash) || strings.Contains(string(hash), secret) {
		t.Fatal("the hash matches another secret")
	}
	_, _, other, _ := NewToken()
	if other == tok {
		t.Fatal("two tokens are equal")
	}
}

func TestParseTokenRefuses(t *testing.T) {
	_, _, tok, _ := NewToken()
	for name, s := range map[string]string{
		"empty":        "",
		"prefix only":  "no8s_",
		"truncated":    tok[:len(tok)-1],
		"extended":     tok + "a",
		"upper case":   strings.ToUpper(tok),
		"no separator": tok[:len(tokenPrefix)+idLen] + "a" + tok[len(tokenPrefix)+idLen+1:],
		"bad alphabet": tok[:len(tok)-1] + "1",
		"jwt":          "eyJhbGciOiJub25lIn0.e30.",
		"other prefix": "ghp_" + tok[len(tokenPrefix):],
	} {
		if _, _, err := ParseToken(s); err == nil {
			t.Errorf("%s: ParseToken(%q) accepted", name, s)
		}
	}
}

// FuzzParseToken: no input panics, and whatever parses is canonical (it
// re-assembles to the input).
func FuzzParseToken(f *testing.F) {
	_, _, tok, _ := NewToken()
	f.Add(tok)
	f.Add("no8s_")
	f.Add("no8s_aaaaaaaaaaaaaaaa_")
	f.Fuzz(func(t *testing.T, s string) {
		id, secret, err := ParseToken(s)
		if err != nil {
			return
		}
		if tokenPrefix+id+"_"+secret != s {
			t.Fatalf("ParseToken(%q) = %q, %q: not the input", s, id, secret)
		}
	})
}

package tenancy

import (
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig/v3"
)

// FuncMap is the template functions of a TenantTemplate: sprig v3.3.0's
// hermetic set (every function whose result depends only on its arguments:
// not env and expandenv, which would let a template read the environment of
// admission or registry-sync, nor now, the random and uuid functions and
// key generation, which would make every render differ and every sync
// rewrite, nor the key, certificate and salt generators and the DNS
// lookup), and the seed's own: toHost, trunc63, sha1sum, fromJson. It is
// built afresh on each call (no shared mutable map).
func FuncMap() template.FuncMap {
	m := sprig.HermeticTxtFuncMap()
	// Sprig's hermetic set still has functions that draw random numbers
	// (keys, certificates, salts, IVs) or reach the network (DNS).
	for _, name := range []string{"genPrivateKey", "genCA", "genCAWithKey", "genSelfSignedCert", "genSelfSignedCertWithKey",
		"genSignedCert", "genSignedCertWithKey", "encryptAES", "bcrypt", "htpasswd", "randBytes", "getHostByName"} {
		delete(m, name)
	}
	m["toHost"] = ToHost
	m["trunc63"] = Trunc63
	m["sha1sum"] = SHA1Sum
	m["fromJson"] = FromJSON
	// text/template's own print functions, overridden so that the
	// Renderer bounds them like the rest (bound).
	m["print"], m["printf"], m["println"] = fmt.Sprint, fmt.Sprintf, fmt.Sprintln
	return m
}

// ToHost extracts the host of a URL; a bare host (with or without a port or
// path) gives the host itself.
func ToHost(s string) string {
	s = strings.TrimSpace(s)
	if !strings.Contains(s, "://") {
		s = "//" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return ""
	}
	return u.Hostname()
}

// Trunc63 cuts s to 63 bytes, the length of a DNS label.
func Trunc63(s string) string {
	if len(s) > 63 {
		return s[:63]
	}
	return s
}

// SHA1Sum is the hexadecimal SHA-1 of s.
func SHA1Sum(s string) string {
	h := sha1.Sum([]byte(s))
	return hex.EncodeToString(h[:])
}

// ErrFromJSON is wrapped by the error of fromJson on text that is not JSON:
// rendering stops with it (a row's bad JSON must not render as an empty
// value). Admission, which renders with sample values that are not JSON,
// tells it apart with errors.Is.
var ErrFromJSON = errors.New("fromJson: not a JSON document")

// FromJSON parses a JSON document into a value; text that is not JSON is
// an error wrapping ErrFromJSON (sprig's mustFromJson; sprig's fromJson
// would render it as nothing).
func FromJSON(s string) (any, error) {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return nil, fmt.Errorf("%w: %q: %v", ErrFromJSON, Trunc63(s), err)
	}
	return v, nil
}

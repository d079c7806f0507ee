package tenancy

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/no8s/no8s/libs/api/names"
)

// Truthy is the activate rule: 1, true, t, yes, y and on, in any case (and
// with surrounding blanks), are true; NULL (nil) and anything else false.
func Truthy(v *string) bool {
	if v == nil {
		return false
	}
	switch strings.ToLower(strings.TrimSpace(*v)) {
	case "1", "true", "t", "yes", "y", "on":
		return true
	}
	return false
}

// TenantName is the name of the Tenant of row uid with template: {uid}-{template}
// mapped to a DNS-1123 label (lower case, [a-z0-9-], runs of anything else
// made one '-', no '-' at either end). Whenever the mapping or the cut to 63
// characters changed anything, the first 8 hex digits of the SHA-256 of the
// raw uid and template are appended (after the cut), so that distinct rows
// never share a name and a name is the same at every sync.
func TenantName(uid, template string) string {
	raw := uid + "-" + template
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(raw) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			dash = false
			continue
		}
		if !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	name := strings.Trim(b.String(), "-")
	if name == raw && names.IsDNSLabel(name) {
		return name
	}
	sum := sha256.Sum256([]byte(uid + "\x00" + template))
	suffix := hex.EncodeToString(sum[:])[:8]
	if max := names.MaxNameLength - len(suffix) - 1; len(name) > max {
		name = strings.TrimRight(name[:max], "-")
	}
	if name == "" {
		return "t-" + suffix
	}
	return name + "-" + suffix
}

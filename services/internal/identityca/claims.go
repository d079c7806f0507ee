package identityca

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/no8s/no8s/libs/platform/identity"
)

// ClaimsFile is the CA directory's record of the types each reconciler
// identity it issued may serve, so that no two reconcilers hold
// certificates for one type.
const ClaimsFile = "claims.json"

// ErrClaimed is wrapped by the refusal to issue a reconciler a type
// another reconciler's unexpired certificate claims.
var ErrClaimed = errors.New("type claimed by another reconciler")

// Claim is one type's holder.
type Claim struct {
	// Reconciler is the name of the reconciler identity that may serve
	// the type.
	Reconciler string `json:"reconciler"`
	// Until is when its last certificate for the type expires: after
	// that the type is free.
	Until time.Time `json:"until"`
}

// Claims maps a type ("Name/version") to its holder.
type Claims map[string]Claim

// ReadClaims reads the claims of the CA directory dir (none when it has
// no claims file yet).
func ReadClaims(dir string) (Claims, error) {
	b, err := os.ReadFile(filepath.Join(dir, ClaimsFile))
	if errors.Is(err, os.ErrNotExist) {
		return Claims{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("type claims: %w", err)
	}
	var doc struct {
		Claims Claims `json:"claims"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("type claims: %s: %w", filepath.Join(dir, ClaimsFile), err)
	}
	if doc.Claims == nil {
		doc.Claims = Claims{}
	}
	return doc.Claims, nil
}

func writeClaims(dir string, c Claims) error {
	b, err := json.MarshalIndent(struct {
		Claims Claims `json:"claims"`
	}{c}, "", "  ")
	if err != nil {
		return fmt.Errorf("type claims: %w", err)
	}
	return writeFile(filepath.Join(dir, ClaimsFile), append(b, '\n'), 0o600)
}

// ClaimTypes records, in the CA directory dir, that the reconciler
// identity id may serve its types until the given time, before a
// certificate saying so is issued. A type an unexpired certificate of
// another reconciler claims is refused (ErrClaimed), naming the holder:
// two reconcilers never hold certificates for one type. The same
// reconciler claiming again (a renewal, a rotation) extends its claim.
// Other identities claim nothing.
func ClaimTypes(dir string, id identity.ID, until, now time.Time) error {
	if id.Kind != identity.Reconciler {
		return nil
	}
	claims, err := ReadClaims(dir)
	if err != nil {
		return err
	}
	var taken []string
	for _, t := range id.Types {
		if c, ok := claims[t]; ok && c.Reconciler != id.Name && now.Before(c.Until) {
			taken = append(taken, fmt.Sprintf("%s by reconciler/%s (until %s)", t, c.Reconciler, c.Until.UTC().Format(time.RFC3339)))
		}
	}
	if len(taken) > 0 {
		sort.Strings(taken)
		return fmt.Errorf("%w: %s: a type has one reconciler; release it first (no8s identity release-type) once that reconciler no longer serves it", ErrClaimed, strings.Join(taken, ", "))
	}
	for _, t := range id.Types {
		if c, ok := claims[t]; !ok || c.Reconciler != id.Name || c.Until.Before(until) {
			claims[t] = Claim{Reconciler: id.Name, Until: until}
		}
	}
	return writeClaims(dir, claims)
}

// ReleaseTypes frees types in the CA directory dir, so that another
// reconciler may be issued them. It returns the claims it removed.
// The released reconciler's certificates stay valid until they expire:
// release a type once its reconciler no longer runs with it.
func ReleaseTypes(dir string, types []string) (Claims, error) {
	claims, err := ReadClaims(dir)
	if err != nil {
		return nil, err
	}
	released := Claims{}
	for _, t := range types {
		if c, ok := claims[t]; ok {
			released[t] = c
			delete(claims, t)
		}
	}
	if len(released) == 0 {
		return released, nil
	}
	return released, writeClaims(dir, claims)
}

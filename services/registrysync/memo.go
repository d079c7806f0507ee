package registrysync

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"maps"
	"slices"

	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/services/internal/tenancy"
	"github.com/no8s/no8s/services/registrysync/datasource"
)

// memo is what a registry's last sync that found nothing to change saw:
// the digest of its inputs (the registry, its templates at their
// generations, the rows read) and its Tenants as listed. A later sync whose
// inputs digest the same and whose Tenants are the same ones, at the same
// generations and labels, would compute the same desired Tenants and find
// them equal: it skips computing and comparing them (issue 41). A memo
// lives as long as the leader's term: a new term's first sync compares.
type memo struct {
	inputs     [sha256.Size]byte
	activeRows int
	tenants    map[string]tenantMark
}

// tenantMark is what the comparison depends on of a listed Tenant: which
// one it is (its id), its spec (a spec change moves its generation), the
// labels the comparison reads, and whether it is being deleted.
type tenantMark struct {
	id, generation     int64
	registry, template string
	deleting           bool
}

func markOf(r *sdk.Resource) tenantMark {
	return tenantMark{id: r.ID, generation: r.Generation, registry: r.Labels[tenancy.LabelRegistry],
		template: r.Labels[tenancy.LabelTemplate], deleting: r.Deleting()}
}

// newMemo records the Tenants of current as a sync with inputs found them.
func newMemo(inputs [sha256.Size]byte, activeRows int, current map[string]currentTenant) *memo {
	m := &memo{inputs: inputs, activeRows: activeRows, tenants: make(map[string]tenantMark, len(current))}
	for name, c := range current {
		m.tenants[name] = markOf(c.res)
	}
	return m
}

// holds reports whether a sync with inputs that listed current would find
// what m's sync found: nothing to change.
func (m *memo) holds(inputs [sha256.Size]byte, current map[string]currentTenant) bool {
	if m == nil || m.inputs != inputs || len(m.tenants) != len(current) {
		return false
	}
	for name, c := range current {
		if mk, ok := m.tenants[name]; !ok || mk != markOf(c.res) {
			return false
		}
	}
	return true
}

// inputsDigest digests what a registry's desired Tenants are computed from:
// the registry (its identity and generation: its spec's mappings), the
// templates referencing it (identity and generation: their resources) and
// the rows read, in order (the order names the rows in a problem).
func inputsDigest(reg *sdk.Resource, templates []*sdk.Resource, rows []datasource.Row) [sha256.Size]byte {
	h := sha256.New()
	resource := func(r *sdk.Resource) {
		str(h, r.UID)
		str(h, r.Name)
		num(h, r.ID)
		num(h, r.Generation)
	}
	resource(reg)
	num(h, int64(len(templates)))
	for _, t := range templates {
		resource(t)
	}
	num(h, int64(len(rows)))
	for _, r := range rows {
		opt(h, r.UID)
		opt(h, r.HostOrURL)
		opt(h, r.Activate)
		num(h, int64(len(r.Extra)))
		for _, k := range slices.Sorted(maps.Keys(r.Extra)) {
			str(h, k)
			opt(h, r.Extra[k])
		}
	}
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}

// num, str and opt write a number, a length-prefixed string and an
// optional string (NULL apart from empty) to h, so that no two different
// inputs write the same bytes.
func num(h hash.Hash, n int64) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(n))
	h.Write(b[:])
}

func str(h hash.Hash, s string) {
	num(h, int64(len(s)))
	h.Write([]byte(s))
}

func opt(h hash.Hash, s *string) {
	if s == nil {
		h.Write([]byte{0})
		return
	}
	h.Write([]byte{1})
	str(h, *s)
}

package authz

import (
	"github.com/no8s/no8s/libs/platform/identity"
	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/services/internal/httpsource"
	"github.com/no8s/no8s/services/internal/tenancy"
)

// RegistrySyncTypes are the built-in types registry-sync's worker serves
// (registries, templates and HTTP sources), as the reconciler named after
// its leader lease.
func RegistrySyncTypes() []sdk.TypeRef {
	return []sdk.TypeRef{
		sdk.Type(tenancy.RegistryType, tenancy.Version),
		sdk.Type(tenancy.TemplateType, tenancy.Version),
		sdk.Type(httpsource.Type, httpsource.Version),
	}
}

// AtTheDoor is the reconciler identity id acts as at the workers' door: a
// reconciler identity is itself, with the types its certificate claims;
// service/registry-sync, which runs a worker of its own, is the reconciler
// registry-sync with RegistrySyncTypes. Any other identity acts as no
// reconciler (false).
func AtTheDoor(id identity.ID) (identity.ID, bool) {
	switch {
	case id.Kind == identity.Reconciler:
		return id, true
	case id.Is(identity.Service, identity.RegistrySync):
		types := RegistrySyncTypes()
		claimed := make([]string, len(types))
		for i, t := range types {
			claimed[i] = t.String()
		}
		return identity.ID{Kind: identity.Reconciler, Name: tenancy.SyncLease, Types: claimed}, true
	}
	return identity.ID{}, false
}

package names

// Size limits. They are chosen so that the largest allowed resource, with its
// status, still fits one event under the broker's default 1 MiB payload limit.
const (
	// MaxRequestBytes bounds an HTTP request body.
	MaxRequestBytes = 1 << 20
	// MaxSpecBytes bounds a spec in compact JSON, defaults applied.
	MaxSpecBytes = 512 << 10
	// MaxMetadataBytes bounds labels, annotations and owner references together.
	MaxMetadataBytes = 64 << 10
	// MaxSchemaBytes bounds a resource type schema.
	MaxSchemaBytes = 512 << 10
	// MaxFinalizers bounds the number of finalizers on one resource.
	MaxFinalizers = 64
	// MaxEventBytes bounds a whole encoded event; the store refuses any write
	// whose event would be larger.
	MaxEventBytes = (1 << 20) - (16 << 10)
)

// Length limits of names.
const (
	// MaxNameLength bounds a DNS-1123 label: resource and reconciler names,
	// the name part of a qualified key, a label value.
	MaxNameLength = 63
	// MaxSubdomainLength bounds a DNS subdomain: a qualified key's prefix, a
	// webhook name.
	MaxSubdomainLength = 253
	// MaxFinalizerLength bounds a finalizer: a prefix, '/' and a name.
	MaxFinalizerLength = 316
)

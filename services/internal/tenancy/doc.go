// Package tenancy holds what registry-sync, admission and (part 2) the
// tenant reconciler share about tenant registries (seed 002): the spec types
// of TenantRegistry, TenantTemplate and Tenant with their field names, the
// template function map (Go text/template + sprig v3.3.0 + toHost, trunc63,
// sha1sum, fromJson), rendering a template resource with a row's values,
// the static checks of a template (ids, dependIds, cycles, templates that
// parse), the activate truthiness rule and the Tenant naming rule.
package tenancy

// Package tenant is the tenant reconciler (issue 15, seed 002's Tenant
// controller), built on libs/sdk like every reconciler and run alone by
// `no8s-reconciler tenant` or inside `no8s dev`. It serves Tenant/v1: each
// Tenant's resources, rendered with its row's values by the one renderer
// (services/internal/tenancy), are applied in dependency order
// (tenancy.Order over dependIds) as no8s resources in the Tenant's
// namespace, owned by the Tenant, through the public REST API as a client
// (libs/client); reads go through the workers' door.
//
// The policies are the seed's: creationPolicy Once (created once, marked
// tenants.no8s.io/created-once, never applied again) or WhenNeeded (applied
// whenever it drifted); deletionPolicy Delete or Retain (kept, the owner
// reference dropped); conflictPolicy Stuck (a child that exists with
// another owner or none makes the Tenant Degraded, naming it, and is not
// touched) or Force (taken over); patchStrategy apply (server-side apply),
// merge (JSON merge patch) or replace (PUT). waitForReady gates the
// dependents of a child on its Ready condition; a child not ready within
// timeoutSeconds of being applied makes the Tenant Degraded, naming it.
// Waiting is a requeue, never a blocked worker. What was applied, and since
// when a child has been waited for, is kept in the Tenant's outputs
// (children), so it survives restarts and a child dropped from the template
// is removed by its deletionPolicy.
package tenant

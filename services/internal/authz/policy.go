// Package authz decides which identity may call each gRPC method of the
// control plane.
//
// The policy is this package's table (Policy): for every method of every
// service a no8s process serves, the identities whose job it is to call it.
// A method missing from the table is refused to everyone, and the package's
// tests fail on a method of the generated service descriptors that the
// table does not name. The security guide's table of who may call what is
// generated from it (docs/security.md).
//
// Authorizer enforces the table on a gRPC server whose listener requires a
// client certificate (identity.Credentials.ServerTLS): its interceptors read
// the caller's identity from the connection, refuse a method the table does
// not give it with PermissionDenied, and put the identity in the call's
// context (Caller), where a handler checks what a caller acts on (a
// reconciler's type claims) and refuses through Deny.
//
// The gateway's REST writes have rules of their own (rest.go, REST): the
// fence headers are registry-sync's, and the reserved keys (Reserved) are
// written only by the identities whose job they are. The caller of a
// request on the gateway's service listener is its client certificate's
// identity (HTTPCaller); any other request is anonymous. The security
// guide's second generated table is Reserved's (RESTTable).
package authz

import (
	"slices"
	"strings"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"

	"github.com/no8s/no8s/libs/platform/identity"
	admissionv1 "github.com/no8s/no8s/proto/gen/no8s/admission/v1"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
)

// Rule is who may call one method.
type Rule struct {
	// Services are the control plane services allowed, by the names of
	// their identities (identity.Gateway, …).
	Services []string
	// Reconcilers allows every reconciler identity. What it acts on is
	// checked by the handler against its type claims (Deny).
	Reconcilers bool
	// Anyone allows every identity the installation's CA issued, clients
	// included: the health service and server reflection.
	Anyone bool
	// Why says in a few words what the callers do with the method, for the
	// security guide's table.
	Why string
}

// Allows reports whether the rule gives the method to id.
func (r Rule) Allows(id identity.ID) bool {
	switch {
	case r.Anyone:
		return true
	case id.Kind == identity.Reconciler:
		return r.Reconcilers
	case id.Kind == identity.Service:
		return slices.Contains(r.Services, id.Name)
	}
	return false
}

// Callers lists the identities the rule allows, as the security guide's
// table shows them.
func (r Rule) Callers() string {
	if r.Anyone {
		return "any identity"
	}
	var out []string
	for _, s := range r.Services {
		out = append(out, string(identity.Service)+"/"+s)
	}
	if r.Reconcilers {
		out = append(out, string(identity.Reconciler)+"/* (its own types)")
	}
	if len(out) == 0 {
		return "nobody"
	}
	return strings.Join(out, ", ")
}

// Policy returns the table: full method name → who may call it. The
// caller may change the map it gets; every call returns a new one.
func Policy() map[string]Rule {
	gatewayOnly := []string{identity.Gateway}
	schedulerOnly := []string{identity.Scheduler}
	// Admission reads the type's schema, the stored object and its
	// namespace, and the webhooks to call.
	gatewayAndAdmission := []string{identity.Gateway, identity.Admission}
	p := map[string]Rule{}
	add := func(r Rule, methods ...string) {
		for _, m := range methods {
			p[m] = r
		}
	}

	// The store's main service: the public API's writes and reads reach it
	// through the gateway only; admission reads what it checks against.
	add(Rule{Services: gatewayOnly, Why: "the public API's type, resource, namespace, webhook and Event calls"},
		storev1.StoreService_CreateResourceType_FullMethodName,
		storev1.StoreService_ListResourceTypes_FullMethodName,
		storev1.StoreService_UpdateResourceType_FullMethodName,
		storev1.StoreService_DeleteResourceType_FullMethodName,
		storev1.StoreService_CreateResource_FullMethodName,
		storev1.StoreService_ListResources_FullMethodName,
		storev1.StoreService_UpdateResource_FullMethodName,
		storev1.StoreService_DeleteResource_FullMethodName,
		storev1.StoreService_UpdateFinalizers_FullMethodName,
		storev1.StoreService_CreateNamespace_FullMethodName,
		storev1.StoreService_ListNamespaces_FullMethodName,
		storev1.StoreService_DeleteNamespace_FullMethodName,
		storev1.StoreService_CreateAdmissionWebhook_FullMethodName,
		storev1.StoreService_GetAdmissionWebhook_FullMethodName,
		storev1.StoreService_UpdateAdmissionWebhook_FullMethodName,
		storev1.StoreService_DeleteAdmissionWebhook_FullMethodName,
		storev1.StoreService_RecordEvent_FullMethodName,
		storev1.StoreService_ListEvents_FullMethodName,
	)
	add(Rule{Services: gatewayAndAdmission, Why: "the public API's reads; admission reads the schema, the stored object, its namespace and the webhooks to call"},
		storev1.StoreService_GetResourceType_FullMethodName,
		storev1.StoreService_GetResource_FullMethodName,
		storev1.StoreService_GetNamespace_FullMethodName,
		storev1.StoreService_ListAdmissionWebhooks_FullMethodName,
	)

	// API tokens: the gateway creates, lists and revokes them for the
	// public API and looks one up to authenticate each request that
	// presents one. Nothing else reads them: LookupToken answers a secret's
	// hash.
	add(Rule{Services: gatewayOnly, Why: "the public API's API tokens, and the lookup that authenticates a request presenting one"},
		storev1.TokenService_CreateToken_FullMethodName,
		storev1.TokenService_ListTokens_FullMethodName,
		storev1.TokenService_RevokeToken_FullMethodName,
		storev1.TokenService_LookupToken_FullMethodName,
	)

	// The scheduler's half of the reconcile service: its leader lease, its
	// view of what to dispatch, and the conditions it sets.
	add(Rule{Services: schedulerOnly, Why: "the scheduler's leader lease, dispatch records, reconcile state and conditions"},
		reconcilev1.ReconcileService_BecomeScheduler_FullMethodName,
		reconcilev1.ReconcileService_RecordDispatch_FullMethodName,
		reconcilev1.ReconcileService_RecordDispatches_FullMethodName,
		reconcilev1.ReconcileService_ListReconcileState_FullMethodName,
		reconcilev1.ReconcileService_SetCondition_FullMethodName,
	)
	add(Rule{Services: schedulerOnly, Why: "the garbage collector's leader lease and its reads of owner references (it runs in the scheduler)"},
		reconcilev1.ReconcileService_ListDependents_FullMethodName,
		reconcilev1.ReconcileService_ListDangling_FullMethodName,
		reconcilev1.ReconcileService_ListPropagating_FullMethodName,
		reconcilev1.ReconcileService_CampaignCollector_FullMethodName,
	)
	add(Rule{Services: gatewayOnly, Why: "the public API's reconcile requests and history"},
		reconcilev1.ReconcileService_RequestReconcile_FullMethodName,
		reconcilev1.ReconcileService_ListHistory_FullMethodName,
	)

	// The workers' door: reconcilers, each within its own types and as
	// itself (AtTheDoor); registry-sync runs a worker for its built-in
	// types there and campaigns for its leader lease.
	add(Rule{Reconcilers: true, Services: []string{identity.RegistrySync}, Why: "a reconciler's leases, completions and finalizers, on resources of its own types, as itself (registry-sync as the reconciler registry-sync, on its built-in types)"},
		reconcilev1.WorkerService_AcquireLease_FullMethodName,
		reconcilev1.WorkerService_RenewLease_FullMethodName,
		reconcilev1.WorkerService_CompleteReconcile_FullMethodName,
		reconcilev1.WorkerService_UpdateFinalizers_FullMethodName,
	)
	add(Rule{Reconcilers: true, Services: []string{identity.RegistrySync}, Why: "reads, and the leader lease named after the caller"},
		reconcilev1.WorkerService_GetResource_FullMethodName,
		reconcilev1.WorkerService_ListResources_FullMethodName,
		reconcilev1.WorkerService_CampaignLeader_FullMethodName,
	)

	// Admission answers the gateway only.
	add(Rule{Services: gatewayOnly, Why: "schema checks and admission of every write"},
		admissionv1.AdmissionService_CheckSchema_FullMethodName,
		admissionv1.AdmissionService_AdmitResource_FullMethodName,
	)

	// Every server's health service and reflection: probes and grpcurl.
	add(Rule{Anyone: true, Why: "health checks (probes, a worker's check of the store)"},
		healthpb.Health_Check_FullMethodName,
		healthpb.Health_Watch_FullMethodName,
		healthpb.Health_List_FullMethodName,
	)
	add(Rule{Anyone: true, Why: "server reflection (grpcurl list and describe)"},
		reflectionv1.ServerReflection_ServerReflectionInfo_FullMethodName,
		reflectionv1alpha.ServerReflection_ServerReflectionInfo_FullMethodName,
	)
	return p
}

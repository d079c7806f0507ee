package sdk

import (
	"github.com/no8s/no8s/libs/client"
	"github.com/no8s/no8s/libs/sdk/internal/wire"
)

// TypeRef names a resource type and version, such as PostgresDatabase/v1
// (the API's, libs/client).
type TypeRef = client.TypeRef

// Type returns the TypeRef name/version.
func Type(name, version string) TypeRef { return TypeRef{Name: name, Version: version} }

// Resource is a declared object as the store holds it, as a step reads it
// in Request.Resource: identity (ID, UID, Namespace, Name, Type), Labels,
// Annotations, OwnerReferences, Spec and Outputs (JSON objects), the
// lifecycle Status (pending, reconciling, ready, failed, deleting: the
// client.Status* constants of libs/client), Generation, ObservedGeneration,
// ResourceVersion, Conditions, Phase, Finalizers and timestamps (DeletedAt
// is set once deletion was requested). Its methods: Deleting,
// HasFinalizer, Operation (the no8s.io/operation annotation), Condition,
// DecodeSpec, String and Clone.
//
// Record results with Request.SetCondition and Request.SetOutput, not by
// changing the Resource: the engine saves what the request holds.
type Resource = wire.Resource

// Client is the store connection a step gets in Request.Client: reads of
// resources (Get, GetByName, List with ListOptions) and the reconciler's own
// finalizers on the resource under reconcile (UpdateFinalizers). The status
// of that resource belongs to the engine, which saves it once.
type Client = wire.ReadWriter

// ListOptions filters and pages Client.List: Namespace ("": every
// namespace), Type, Status, LabelSelector (the Kubernetes syntax), Limit and
// Continue (the token of the previous page).
type ListOptions = wire.ListOptions

// ErrNotFound is what Client's Get and GetByName return, matchable with
// errors.Is, when the resource does not exist (or was purged).
var ErrNotFound = wire.ErrNotFound

// Event is an Event (the Kubernetes kind) recorded with Request.Event: Type
// (names.EventNormal or names.EventWarning of libs/api), Reason and Message.
type Event = wire.Event

package store

import (
	"context"

	"github.com/no8s/no8s/libs/api/lifecycle"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/internal/problem"
	"github.com/no8s/no8s/services/internal/resourcepb"
	"github.com/no8s/no8s/services/store/storage"
)

// handler is the gRPC edge of the store: the only place protobuf types meet
// the store's domain types.
type handler struct {
	storev1.UnimplementedStoreServiceServer
	store storage.Store
}

// requireSchemaRevision refuses a spec write that does not name the type
// revision admission validated it against: without it the store could not
// tell a spec checked against an older schema (schema_changed), so no spec
// reaches the store unadmitted.
func requireSchemaRevision(rev int64) error {
	if rev <= 0 {
		return problem.Field("/schema_revision",
			"required on every spec write: the resource type's resource_version the spec was admitted against (write through admission)")
	}
	return nil
}

func (h *handler) CreateResourceType(ctx context.Context, req *storev1.CreateResourceTypeRequest) (*storev1.CreateResourceTypeResponse, error) {
	t := req.GetResourceType()
	out, err := h.store.CreateType(ctx, storage.CreateTypeRequest{
		Name: t.GetName(), Version: t.GetVersion(), Description: t.GetDescription(), Schema: t.GetSchema(), DryRun: req.GetDryRun(),
		ReconcilePolicy: resourcepb.PolicyFromProto(t.GetReconcilePolicy()),
	})
	if err != nil {
		return nil, toStatus(err)
	}
	return &storev1.CreateResourceTypeResponse{ResourceType: resourcepb.TypeToProto(out)}, nil
}

func (h *handler) GetResourceType(ctx context.Context, req *storev1.GetResourceTypeRequest) (*storev1.GetResourceTypeResponse, error) {
	out, err := h.store.GetType(ctx, storage.TypeKey{ID: req.GetId(), Name: req.GetName(), Version: req.GetVersion()})
	if err != nil {
		return nil, toStatus(err)
	}
	return &storev1.GetResourceTypeResponse{ResourceType: resourcepb.TypeToProto(out)}, nil
}

func (h *handler) ListResourceTypes(ctx context.Context, req *storev1.ListResourceTypesRequest) (*storev1.ListResourceTypesResponse, error) {
	types, err := h.store.ListTypes(ctx, req.GetName())
	if err != nil {
		return nil, toStatus(err)
	}
	out := &storev1.ListResourceTypesResponse{ResourceTypes: make([]*storev1.ResourceType, 0, len(types))}
	for _, t := range types {
		out.ResourceTypes = append(out.ResourceTypes, resourcepb.TypeToProto(t))
	}
	return out, nil
}

func (h *handler) UpdateResourceType(ctx context.Context, req *storev1.UpdateResourceTypeRequest) (*storev1.UpdateResourceTypeResponse, error) {
	ureq := storage.UpdateTypeRequest{ID: req.GetId(), Description: req.Description, Schema: req.GetSchema(), DryRun: req.GetDryRun()}
	if p := req.GetReconcilePolicy(); p != nil {
		policy := resourcepb.PolicyFromProto(p)
		ureq.ReconcilePolicy = &policy
	}
	out, err := h.store.UpdateType(ctx, ureq)
	if err != nil {
		return nil, toStatus(err)
	}
	return &storev1.UpdateResourceTypeResponse{ResourceType: resourcepb.TypeToProto(out)}, nil
}

func (h *handler) DeleteResourceType(ctx context.Context, req *storev1.DeleteResourceTypeRequest) (*storev1.DeleteResourceTypeResponse, error) {
	if err := h.store.DeleteType(ctx, req.GetId(), req.GetDryRun()); err != nil {
		return nil, toStatus(err)
	}
	return &storev1.DeleteResourceTypeResponse{}, nil
}

func (h *handler) CreateResource(ctx context.Context, req *storev1.CreateResourceRequest) (*storev1.CreateResourceResponse, error) {
	ctx, err := fenced(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	in := resourcepb.FromProto(req.GetResource())
	if in == nil {
		return nil, toStatus(problem.Invalidf("resource is required"))
	}
	if err := requireSchemaRevision(req.GetSchemaRevision()); err != nil {
		return nil, toStatus(err)
	}
	out, err := h.store.CreateResource(ctx, storage.CreateResourceRequest{Resource: *in, SchemaRevision: req.GetSchemaRevision(), DryRun: req.GetDryRun()})
	if err != nil {
		return nil, toStatus(err)
	}
	return &storev1.CreateResourceResponse{Resource: resourcepb.ToProto(out)}, nil
}

func (h *handler) GetResource(ctx context.Context, req *storev1.GetResourceRequest) (*storev1.GetResourceResponse, error) {
	out, err := h.store.GetResource(ctx, resourceKey(req.GetId(), req.GetName()))
	if err != nil {
		return nil, toStatus(err)
	}
	return &storev1.GetResourceResponse{Resource: resourcepb.ToProto(out)}, nil
}

func (h *handler) ListResources(ctx context.Context, req *storev1.ListResourcesRequest) (*storev1.ListResourcesResponse, error) {
	res, err := h.store.ListResources(ctx, storage.ListResourcesRequest{
		ResourceTypeName: req.GetResourceTypeName(), ResourceTypeVersion: req.GetResourceTypeVersion(), Namespace: req.GetNamespace(),
		Status: req.GetStatus(), LabelSelector: req.GetLabelSelector(), Limit: int(req.GetLimit()), Continue: req.GetContinueToken(),
		Documents: req.GetDocuments(),
	})
	if err != nil {
		return nil, toStatus(err)
	}
	out := &storev1.ListResourcesResponse{
		Resources:       make([]*storev1.Resource, 0, len(res.Resources)),
		ContinueToken:   res.Continue,
		ResourceVersion: res.ResourceVersion,
		Documents:       res.Documents,
	}
	for _, r := range res.Resources {
		out.Resources = append(out.Resources, resourcepb.ToProto(r))
	}
	return out, nil
}

func (h *handler) UpdateResource(ctx context.Context, req *storev1.UpdateResourceRequest) (*storev1.UpdateResourceResponse, error) {
	ctx, err := fenced(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	if req.GetSpec() != nil {
		if err := requireSchemaRevision(req.GetSchemaRevision()); err != nil {
			return nil, toStatus(err)
		}
	}
	out, err := h.store.UpdateResource(ctx, storage.UpdateResourceRequest{
		ID:                      req.GetId(),
		Spec:                    req.GetSpec(),
		Labels:                  req.GetLabels().GetEntries(),
		SetLabels:               req.GetLabels() != nil,
		Annotations:             req.GetAnnotations().GetEntries(),
		SetAnnotations:          req.GetAnnotations() != nil,
		OwnerReferences:         resourcepb.OwnerReferencesFromProto(req.GetOwnerReferences().GetItems()),
		SetOwnerReferences:      req.GetOwnerReferences() != nil,
		ExpectedResourceVersion: req.GetExpectedResourceVersion(),
		SchemaRevision:          req.GetSchemaRevision(),
		DryRun:                  req.GetDryRun(),
	})
	if err != nil {
		return nil, toStatus(err)
	}
	return &storev1.UpdateResourceResponse{Resource: resourcepb.ToProto(out)}, nil
}

func (h *handler) DeleteResource(ctx context.Context, req *storev1.DeleteResourceRequest) (*storev1.DeleteResourceResponse, error) {
	ctx, err := fenced(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	res, err := h.store.DeleteResource(ctx, storage.DeleteResourceRequest{
		ID: req.GetId(), ExpectedResourceVersion: req.GetExpectedResourceVersion(), DryRun: req.GetDryRun(),
		Propagation: lifecycle.Propagation(req.GetPropagationPolicy()),
	})
	if err != nil {
		return nil, toStatus(err)
	}
	return &storev1.DeleteResourceResponse{Resource: resourcepb.ToProto(res.Resource), Purged: res.Purged}, nil
}

func (h *handler) UpdateFinalizers(ctx context.Context, req *storev1.UpdateFinalizersRequest) (*storev1.UpdateFinalizersResponse, error) {
	ctx, err := fenced(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	res, err := h.store.UpdateFinalizers(ctx, storage.UpdateFinalizersRequest{
		ID: req.GetId(), Add: req.GetAdd(), Remove: req.GetRemove(), ExpectedResourceVersion: req.GetExpectedResourceVersion(), DryRun: req.GetDryRun(),
	})
	if err != nil {
		return nil, toStatus(err)
	}
	return &storev1.UpdateFinalizersResponse{Resource: resourcepb.ToProto(res.Resource), Purged: res.Purged}, nil
}

func (h *handler) CreateNamespace(ctx context.Context, req *storev1.CreateNamespaceRequest) (*storev1.CreateNamespaceResponse, error) {
	out, err := h.store.CreateNamespace(ctx, req.GetName(), req.GetDryRun())
	if err != nil {
		return nil, toStatus(err)
	}
	return &storev1.CreateNamespaceResponse{Namespace: resourcepb.NamespaceToProto(out)}, nil
}

func (h *handler) GetNamespace(ctx context.Context, req *storev1.GetNamespaceRequest) (*storev1.GetNamespaceResponse, error) {
	out, err := h.store.GetNamespace(ctx, req.GetName())
	if err != nil {
		return nil, toStatus(err)
	}
	return &storev1.GetNamespaceResponse{Namespace: resourcepb.NamespaceToProto(out)}, nil
}

func (h *handler) ListNamespaces(ctx context.Context, _ *storev1.ListNamespacesRequest) (*storev1.ListNamespacesResponse, error) {
	list, err := h.store.ListNamespaces(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	out := &storev1.ListNamespacesResponse{Namespaces: make([]*storev1.Namespace, 0, len(list))}
	for _, n := range list {
		out.Namespaces = append(out.Namespaces, resourcepb.NamespaceToProto(n))
	}
	return out, nil
}

func (h *handler) DeleteNamespace(ctx context.Context, req *storev1.DeleteNamespaceRequest) (*storev1.DeleteNamespaceResponse, error) {
	res, err := h.store.DeleteNamespace(ctx, req.GetName(), req.GetDryRun())
	if err != nil {
		return nil, toStatus(err)
	}
	return &storev1.DeleteNamespaceResponse{Namespace: resourcepb.NamespaceToProto(res.Namespace), Purged: res.Purged}, nil
}

// resourceKey is the key of a GetResource call (the store's and the
// workers'): a name when one is given (in its namespace, the default one
// when it names none), else the id.
func resourceKey(id int64, n *storev1.ResourceName) storage.ResourceKey {
	if n != nil {
		return storage.ResourceKey{ResourceTypeName: n.GetResourceTypeName(), ResourceTypeVersion: n.GetResourceTypeVersion(),
			Namespace: n.GetNamespace(), Name: n.GetName()}
	}
	return storage.ResourceKey{ID: id}
}

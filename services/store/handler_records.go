package store

import (
	"context"
	"strconv"
	"strings"

	"google.golang.org/grpc/metadata"

	"github.com/no8s/no8s/libs/api/fence"
	"google.golang.org/protobuf/types/known/timestamppb"

	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/internal/problem"
	"github.com/no8s/no8s/services/store/storage"
)

// fenced returns ctx carrying the fence of the call's metadata, if any
// (storage.WithFence): the store then commits the write only while the
// fence holds.
func fenced(ctx context.Context) (context.Context, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	lease, epoch := md.Get(fence.MetadataLease), md.Get(fence.MetadataEpoch)
	if len(lease) == 0 && len(epoch) == 0 {
		return ctx, nil
	}
	if len(lease) != 1 || len(epoch) != 1 {
		return ctx, problem.Field("/fence", "a fenced write names one lease and one epoch")
	}
	n, err := strconv.ParseInt(strings.TrimSpace(epoch[0]), 10, 64)
	if err != nil || n <= 0 {
		return ctx, problem.Field("/fence/epoch", "a fence's epoch is a positive integer")
	}
	f := storage.Fence{Lease: lease[0], Epoch: n}
	if err := f.Validate(); err != nil {
		return ctx, err
	}
	return storage.WithFence(ctx, f), nil
}

func eventInputFromProto(e *storev1.EventInput) storage.EventInput {
	return storage.EventInput{Type: e.GetType(), Reason: e.GetReason(), Message: e.GetMessage(), Source: e.GetSource()}
}

func eventsFromProto(in []*storev1.EventInput) []storage.EventInput {
	if len(in) == 0 {
		return nil
	}
	out := make([]storage.EventInput, 0, len(in))
	for _, e := range in {
		out = append(out, eventInputFromProto(e))
	}
	return out
}

func eventToProto(e *storage.EventRecord) *storev1.EventRecord {
	return &storev1.EventRecord{
		Id: e.ID, ResourceId: e.ResourceID, ResourceUid: e.ResourceUID, ResourceName: e.ResourceName,
		ResourceTypeName: e.ResourceTypeName, ResourceTypeVersion: e.ResourceTypeVersion,
		Type: e.Type, Reason: e.Reason, Message: e.Message, Source: e.Source, Count: e.Count,
		FirstTime: timestamppb.New(e.FirstTime), LastTime: timestamppb.New(e.LastTime),
	}
}

func (h *handler) RecordEvent(ctx context.Context, req *storev1.RecordEventRequest) (*storev1.RecordEventResponse, error) {
	ctx, err := fenced(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	out, err := h.store.RecordEvent(ctx, storage.RecordEventRequest{ResourceID: req.GetResourceId(), Event: eventInputFromProto(req.GetEvent())})
	if err != nil {
		return nil, toStatus(err)
	}
	return &storev1.RecordEventResponse{Event: eventToProto(out)}, nil
}

func (h *handler) ListEvents(ctx context.Context, req *storev1.ListEventsRequest) (*storev1.ListEventsResponse, error) {
	evs, err := h.store.ListEvents(ctx, storage.ListEventsRequest{
		ResourceID: req.GetResourceId(), Type: req.GetType(), Reason: req.GetReason(), Limit: int(req.GetLimit()), BeforeID: req.GetBeforeId(),
	})
	if err != nil {
		return nil, toStatus(err)
	}
	out := &storev1.ListEventsResponse{Events: make([]*storev1.EventRecord, 0, len(evs))}
	for i := range evs {
		out.Events = append(out.Events, eventToProto(&evs[i]))
	}
	return out, nil
}

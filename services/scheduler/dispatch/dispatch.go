// Package dispatch is the scheduler's side of the work queue: the JetStream
// stream NO8S_RECONCILE (work-queue retention, subjects
// no8s.reconcile.<Type>.<version>; names and settings in libs/api/subjects)
// and the publication of work items (no8s.reconcile.v1.WorkItem,
// Nats-Msg-Id = the dispatch id, and the W3C traceparent/tracestate
// headers of the dispatch span when traced).
package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/no8s/no8s/proto/enumpb"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/no8s/no8s/libs/api/subjects"
	"github.com/no8s/no8s/libs/platform/tracing"
	"github.com/no8s/no8s/libs/sdk/worker"
	reconcilev1 "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
	"github.com/no8s/no8s/services/scheduler/trigger"
)

// StreamConfig configures the work stream when the scheduler creates it.
type StreamConfig = subjects.StreamSettings

// DefaultStreamConfig is the work queue's settings of libs/api/subjects.
func DefaultStreamConfig() StreamConfig { return subjects.ReconcileSettings() }

// Ensure returns the work stream, creating it when missing. An existing
// stream (a worker may have created it first) is used as it is.
func Ensure(ctx context.Context, js jetstream.StreamManager, c StreamConfig) (jetstream.Stream, error) {
	s, err := js.Stream(ctx, subjects.ReconcileStream)
	if err == nil {
		return s, nil
	}
	if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("work stream %s: %w", subjects.ReconcileStream, err)
	}
	s, err = js.CreateStream(ctx, worker.WorkStreamConfig(subjects.ReconcileStream, c))
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return js.Stream(ctx, subjects.ReconcileStream)
	}
	if err != nil {
		return nil, fmt.Errorf("create work stream %s: %w", subjects.ReconcileStream, err)
	}
	return s, nil
}

// Item is one dispatch.
type Item struct {
	ResourceID     int64
	ResourceUID    string
	TypeName       string
	TypeVersion    string
	Reason         trigger.Reason
	SchedulerEpoch int64
	DispatchID     string
	DispatchedAt   time.Time
	// TraceContext is the trace context the item's message carries in its
	// traceparent and tracestate headers (tracing.Encode's form: the
	// dispatch span's); "" for none.
	TraceContext string
}

// Subject is the item's subject (subjects.Reconcile of its type).
func (it Item) Subject() string { return subjects.Reconcile(it.TypeName, it.TypeVersion) }

// msg is the item's message: its subject, its wire form and, when it has a
// trace context, the W3C headers.
func (it Item) msg() (*nats.Msg, error) {
	data, err := protoMarshal(it)
	if err != nil {
		return nil, err
	}
	m := &nats.Msg{Subject: it.Subject(), Data: data}
	if it.TraceContext != "" {
		m.Header = nats.Header{}
		tracing.SetHeaders(m.Header, it.TraceContext)
	}
	return m, nil
}

// Proto is the item's wire form.
func (it Item) Proto() *reconcilev1.WorkItem {
	return &reconcilev1.WorkItem{
		ResourceId:          it.ResourceID,
		ResourceUid:         it.ResourceUID,
		ResourceTypeName:    it.TypeName,
		ResourceTypeVersion: it.TypeVersion,
		Reason:              enumpb.Reason(it.Reason),
		SchedulerEpoch:      it.SchedulerEpoch,
		DispatchId:          it.DispatchID,
		DispatchedAt:        timestamppb.New(it.DispatchedAt),
	}
}

// Publish publishes an item and returns its stream sequence.
func Publish(ctx context.Context, js jetstream.Publisher, it Item) (uint64, error) {
	m, err := it.msg()
	if err != nil {
		return 0, err
	}
	ack, err := js.PublishMsg(ctx, m, jetstream.WithMsgID(it.DispatchID))
	if err != nil {
		return 0, fmt.Errorf("publish work item: %w", err)
	}
	return ack.Sequence, nil
}

// PublishAll publishes items together (asynchronously, then waiting for
// every acknowledgement) and returns each one's stream sequence or error,
// in the order of items.
func PublishAll(ctx context.Context, js jetstream.Publisher, items []Item) ([]uint64, []error) {
	seqs := make([]uint64, len(items))
	errs := make([]error, len(items))
	futures := make([]jetstream.PubAckFuture, len(items))
	for i, it := range items {
		msg, err := it.msg()
		if err != nil {
			errs[i] = err
			continue
		}
		if futures[i], err = js.PublishMsgAsync(msg, jetstream.WithMsgID(it.DispatchID)); err != nil {
			errs[i] = fmt.Errorf("publish work item: %w", err)
		}
	}
	for i, f := range futures {
		if f == nil {
			continue
		}
		select {
		case ack := <-f.Ok():
			seqs[i] = ack.Sequence
		case err := <-f.Err():
			errs[i] = fmt.Errorf("publish work item: %w", err)
		case <-ctx.Done():
			errs[i] = fmt.Errorf("publish work item: %w", ctx.Err())
		}
	}
	return seqs, errs
}

func protoMarshal(it Item) ([]byte, error) {
	data, err := proto.Marshal(it.Proto())
	if err != nil {
		return nil, fmt.Errorf("encode work item: %w", err)
	}
	return data, nil
}

// Decode parses a work item (tests and tools).
func Decode(data []byte) (*reconcilev1.WorkItem, error) {
	var w reconcilev1.WorkItem
	if err := proto.Unmarshal(data, &w); err != nil {
		return nil, fmt.Errorf("decode work item: %w", err)
	}
	return &w, nil
}

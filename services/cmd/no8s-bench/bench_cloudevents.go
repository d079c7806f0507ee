package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/no8s/no8s/services/internal/eventstream"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/store/outbox"
	"github.com/no8s/no8s/services/store/storage"
)

// The "cloudevents" scenario (issue 18 scope 3): what the CloudEvents
// headers cost the outbox relay. It publishes the same outbox rows (a
// typical DatabaseCluster event, rendered by the store's own
// storage.RenderEvent) the way the relay does (async batches of
// relayBatch, each message with its dedup id, then every ack awaited) to a
// scratch stream on the stack's nats-server process, once with the message
// the relay built before (Nats-Msg-Id, No8s-Store-Id, No8s-Stream-Base)
// and once with outbox.Message (the same plus the CloudEvents attributes),
// alternating rounds so both see the same machine. The ratio of the two
// rates is the cost; the build cost per message and the bytes added are
// printed beside it.
const (
	ceRows      = 40000
	ceRounds    = 8 // per variant
	relayBatch  = 512
	ceStream    = "NO8S_BENCH_CLOUDEVENTS"
	ceSubjectPf = "bench.cloudevents."
)

func benchCloudEvents(ctx context.Context, env *benchEnv) error {
	nc, err := env.connectNATS()
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4*relayBatch))
	if err != nil {
		return err
	}
	settings := eventstream.DefaultStreamConfig()
	stream, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: ceStream, Subjects: []string{ceSubjectPf + ">"},
		Storage: jetstream.FileStorage, MaxAge: settings.MaxAge, Duplicates: settings.Duplicates, MaxMsgSize: 1 << 20})
	if err != nil {
		return err
	}
	defer func() { _ = js.DeleteStream(context.WithoutCancel(ctx), ceStream) }()

	rows, err := ceOutboxRows()
	if err != nil {
		return err
	}
	const storeID, base = "7d1f0c0e-5b5e-4f7e-9a51-2f3e4c5d6e7f", "0"
	variants := []struct {
		name string
		msg  func(x storage.OutboxRow) *nats.Msg
	}{
		{"before: dedup id + stream identity (3 headers)", func(x storage.OutboxRow) *nats.Msg {
			m := &nats.Msg{Subject: x.Subject, Data: x.Payload, Header: nats.Header{}}
			m.Header.Set(jetstream.MsgIDHeader, eventstream.MsgID(x.Revision))
			m.Header.Set(eventstream.StoreIDHeader, storeID)
			m.Header.Set(eventstream.BaseHeader, base)
			return m
		}},
		{"now: outbox.Message (+ CloudEvents, 10 headers)", func(x storage.OutboxRow) *nats.Msg { return outbox.Message(x, storeID, base) }},
	}
	rates := make([][]float64, len(variants))
	revision := int64(0)
	for range ceRounds {
		for v, variant := range variants {
			if err := stream.Purge(ctx); err != nil {
				return err
			}
			start := time.Now()
			for i := 0; i < len(rows); i += relayBatch {
				batch := rows[i:min(i+relayBatch, len(rows))]
				futures := make([]jetstream.PubAckFuture, 0, len(batch))
				for _, x := range batch {
					revision++
					x.Revision = revision // a fresh dedup id every round
					f, err := js.PublishMsgAsync(variant.msg(x))
					if err != nil {
						return err
					}
					futures = append(futures, f)
				}
				for _, f := range futures {
					select {
					case <-f.Ok():
					case err := <-f.Err():
						return err
					case <-ctx.Done():
						return ctx.Err()
					}
				}
			}
			rates[v] = append(rates[v], float64(len(rows))/time.Since(start).Seconds())
		}
	}
	// The build cost alone, in this process: the fastest of 5 passes.
	build := make([]time.Duration, len(variants))
	size := make([]int, len(variants))
	for pass := range 5 {
		for v, variant := range variants {
			start := time.Now()
			bytes := 0
			for _, x := range rows {
				m := variant.msg(x)
				for k, vals := range m.Header {
					bytes += len(k) + len(vals[0]) + 4
				}
			}
			if d := time.Since(start) / time.Duration(len(rows)); pass == 0 || d < build[v] {
				build[v] = d
			}
			size[v] = bytes / len(rows)
		}
	}
	// Each round of one variant ran right after the other's: the median of
	// the rounds' ratios is the figure least disturbed by the machine.
	var ratios []float64
	for i := range rates[0] {
		ratios = append(ratios, rates[1][i]/rates[0][i])
	}
	slices.Sort(ratios)
	fmt.Printf("%d outbox rows of %d bytes each (DatabaseCluster/v1, rendered by storage.RenderEvent), published as the relay does\n", len(rows), len(rows[0].Payload))
	fmt.Printf("(async batches of %d, every ack awaited) to a file stream on the stack's nats-server; %d alternating rounds per variant\n", relayBatch, ceRounds)
	tw := newTable()
	fmt.Fprintln(tw, "message\tevents/s (median)\trounds\tbuild/msg\theader bytes/msg")
	median := make([]float64, len(variants))
	for v, variant := range variants {
		rs := slices.Clone(rates[v])
		slices.Sort(rs)
		median[v] = (rs[(len(rs)-1)/2] + rs[len(rs)/2]) / 2
		all := ""
		for i, r := range rates[v] {
			if i > 0 {
				all += " "
			}
			all += strconv.FormatFloat(r, 'f', 0, 64)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%s\t%s\t%d\n", variant.name, median[v], all, build[v], size[v])
	}
	_ = tw.Flush()
	fmt.Printf("relay publish rate with CloudEvents headers / without: %.3f (median of the %d back-to-back round pairs; ratio of the medians %.3f; 1.000 = free)\n",
		(ratios[(len(ratios)-1)/2]+ratios[len(ratios)/2])/2, len(ratios), median[1]/median[0])
	return nil
}

// ceOutboxRows renders ceRows events of a typical resource.
func ceOutboxRows() ([]storage.OutboxRow, error) {
	now := time.Now().UTC()
	rows := make([]storage.OutboxRow, 0, ceRows)
	for i := range ceRows {
		r := &resource.Resource{
			ID: int64(i + 1), UID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i), Name: fmt.Sprintf("production-pg-%05d", i),
			ResourceTypeName: "DatabaseCluster", ResourceTypeVersion: "v1",
			Labels: map[string]string{"tier": "db", "team": "payments"}, Annotations: map[string]string{},
			Spec:   []byte(`{"engine":"postgres","storage_gb":500,"replicas":2,"version":"16","backup":{"enabled":true,"retention_days":14}}`),
			Status: "pending", Phase: "Progressing", Generation: 1, CreatedAt: now,
		}
		row, err := storage.RenderEvent("MODIFIED", r, int64(i+1), now, false)
		if err != nil {
			return nil, err
		}
		row.Subject = ceSubjectPf + "DatabaseCluster.v1"
		rows = append(rows, row)
	}
	return rows, nil
}

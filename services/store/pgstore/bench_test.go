package pgstore_test

// Benchmarks of the store's hot paths on a real PostgreSQL (issue 13): a
// create, and a reconcile as the scheduler and a worker drive it (dispatch
// record, lease, completion). Besides time and allocations per operation
// they report what the database did per operation, which, unlike time,
// does not depend on the load of a shared machine:
//
//   - round-trips/op: writes to the database's connections (each request
//     or pipelined batch is one);
//   - commits/op: transactions committed in the database;
//   - hot-%: the share of resources row updates that were HOT (no index
//     entry written);
//   - pg-cpu-µs/op: CPU time of the database's backends serving the pool.
//
//	go test -run '^$' -bench . -benchtime 2000x ./services/store/pgstore/
//
// BENCH_SQL runs SQL after the migrations (to try a schema change, e.g.
// BENCH_SQL='CREATE INDEX ...'); BENCH_GROUP_COMMIT=off runs every write of
// BenchmarkReconcileParallel in a transaction of its own.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/no8s/no8s/libs/api/lifecycle"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/internal/testenv"
	"github.com/no8s/no8s/services/store/migrate"
	"github.com/no8s/no8s/services/store/pgstore"
	"github.com/no8s/no8s/services/store/storage"
)

// countingConn counts the writes to a database connection.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

// benchDB is a migrated database with a pool whose connections count their
// writes.
type benchDB struct {
	pool   *pgxpool.Pool
	writes atomic.Int64
}

func newBenchDB(b *testing.B) *benchDB {
	b.Helper()
	ctx := b.Context()
	db := &benchDB{}
	cfg, err := pgxpool.ParseConfig(testenv.Database(b))
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = 32
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{Conn: c, writes: &db.writes}, nil
	}
	cfg.ConnConfig.LookupFunc = func(ctx context.Context, host string) ([]string, error) { return []string{host}, nil }
	if db.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(db.pool.Close)
	if _, err := migrate.Up(ctx, db.pool, slog.New(slog.DiscardHandler)); err != nil {
		b.Fatal(err)
	}
	if x := os.Getenv("BENCH_SQL"); x != "" {
		if _, err := db.pool.Exec(ctx, x); err != nil {
			b.Fatal(err)
		}
	}
	return db
}

// dbSample is what the database did so far.
type dbSample struct {
	writes, commits, upd, hot int64
	cpu                       time.Duration
}

func (db *benchDB) sample(b *testing.B) dbSample {
	b.Helper()
	ctx := b.Context()
	s := dbSample{writes: db.writes.Load()}
	// The statistics of this database's backends reach pg_stat_* when they
	// go idle (at most once a second): force it for the pool's ones.
	conns := db.pool.AcquireAllIdle(ctx)
	for _, c := range conns {
		_, _ = c.Exec(ctx, `SELECT pg_stat_force_next_flush()`)
		var pid int
		if err := c.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err == nil {
			s.cpu += procCPUTime(pid)
		}
		c.Release()
	}
	time.Sleep(10 * time.Millisecond) // let an idle backend report
	if err := db.pool.QueryRow(ctx, `SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`).Scan(&s.commits); err != nil {
		b.Fatal(err)
	}
	if err := db.pool.QueryRow(ctx, `SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'resources'`).Scan(&s.upd, &s.hot); err != nil {
		b.Fatal(err)
	}
	s.writes = db.writes.Load()
	return s
}

// report adds the database's work per operation between two samples.
func (s dbSample) report(b *testing.B, prev dbSample) {
	n := float64(b.N)
	b.ReportMetric(float64(s.writes-prev.writes)/n, "round-trips/op")
	b.ReportMetric(float64(s.commits-prev.commits)/n, "commits/op")
	if upd := s.upd - prev.upd; upd > 0 {
		b.ReportMetric(100*float64(s.hot-prev.hot)/float64(upd), "hot-%")
	}
	b.ReportMetric(float64((s.cpu-prev.cpu).Microseconds())/n, "pg-cpu-µs/op")
}

// procCPUTime is utime + stime of a process (0 when unreadable).
func procCPUTime(pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(raw[i+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100
}

// benchSpec and benchLabels are the bench's create body's (make bench).
var (
	benchSpec   = json.RawMessage(`{"backup_retention_days":14,"engine":"postgres","engine_version":"16.2","high_availability":true,"instance_class":"db.large","replicas":2,"storage_gb":500}`)
	benchLabels = map[string]string{"app.kubernetes.io/name": "orders-db", "app.kubernetes.io/part-of": "orders", "team": "payments",
		"environment": "production", "tier": "database", "region": "eu-west-1"}
	benchAnnotations = map[string]string{"no8s.io/owner": "payments-oncall@example.com", "no8s.io/description": "Primary PostgreSQL cluster of the orders service"}
)

func benchCreate(ctx context.Context, s *pgstore.Store, rev int64, name string) (*resource.Resource, error) {
	return s.CreateResource(ctx, storage.CreateResourceRequest{SchemaRevision: rev, Resource: resource.Resource{
		Name: name, ResourceTypeName: "Bench", ResourceTypeVersion: "v1", Spec: benchSpec,
		Labels: benchLabels, Annotations: benchAnnotations, Finalizers: []string{"reconciler.no8s.io/bench"},
	}})
}

func benchType(b *testing.B, s *pgstore.Store) int64 {
	b.Helper()
	typ, err := s.CreateType(b.Context(), storage.CreateTypeRequest{Name: "Bench", Version: "v1", Schema: []byte(`{"type":"object"}`)})
	if err != nil {
		b.Fatal(err)
	}
	return typ.ResourceVersion
}

// BenchmarkCreate is one resource created (its row and its CREATED event).
func BenchmarkCreate(b *testing.B) {
	db := newBenchDB(b)
	s := pgstore.New(db.pool, storage.Options{})
	rev := benchType(b, s)
	ctx := b.Context()
	b.ReportAllocs()
	before := db.sample(b)
	b.ResetTimer()
	for i := range b.N {
		if _, err := benchCreate(ctx, s, rev, fmt.Sprintf("r-%07d", i)); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	db.sample(b).report(b, before)
}

// BenchmarkReconcile is one reconcile of a ready resource whose spec
// changed, as the scheduler and a worker drive it: the dispatch record, the
// lease (ready → reconciling) and a successful completion with its history
// row, over 1,000 resources in turn.
func BenchmarkReconcile(b *testing.B) {
	const resources = 1000
	db := newBenchDB(b)
	s := pgstore.New(db.pool, storage.Options{})
	rev := benchType(b, s)
	ctx := b.Context()
	lead, err := s.BecomeScheduler(ctx, "bench-scheduler", time.Hour, 0)
	if err != nil || !lead.Leader {
		b.Fatalf("become scheduler: %+v %v", lead, err)
	}
	ids := make([]int64, resources)
	for i := range ids {
		r, err := benchCreate(ctx, s, rev, fmt.Sprintf("r-%07d", i))
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = r.ID
	}
	reconcile := func(id int64, n int) {
		dispatch := fmt.Sprintf("d-%d", n)
		if err := storage.RecordDispatch(ctx, s, lead.Epoch, id, dispatch); err != nil {
			b.Fatal(err)
		}
		l, err := s.AcquireLease(ctx, storage.AcquireLeaseRequest{ResourceID: id, Holder: "bench/a", SchedulerEpoch: lead.Epoch, DispatchID: dispatch})
		if err != nil {
			b.Fatal(err)
		}
		started := time.Now()
		if _, err := s.CompleteReconcile(ctx, storage.CompleteReconcileRequest{
			ResourceID: id, LeaseEpoch: l.Epoch, Outcome: lifecycle.OutcomeSuccess, Generation: l.Resource.Generation, Observed: true,
			Conditions: []resource.Condition{{Type: "Ready", Status: resource.ConditionTrue, Reason: "Reconciled"}},
			History:    storage.HistoryEntry{Phase: "Ready", StartedAt: &started, Reason: "spec_changed"},
		}); err != nil {
			b.Fatal(err)
		}
	}
	for i, id := range ids { // every resource ready once, as in the bench's backlog
		reconcile(id, -i-1)
	}
	b.ReportAllocs()
	before := db.sample(b)
	b.ResetTimer()
	for i := range b.N {
		reconcile(ids[i%resources], i)
	}
	b.StopTimer()
	db.sample(b).report(b, before)
}

// BenchmarkReconcileParallel is BenchmarkReconcile from 16 goroutines at
// once (as two worker replicas of eight run), each on resources of its own:
// the writes share transactions (group commit).
func BenchmarkReconcileParallel(b *testing.B) {
	const resources = 1600
	db := newBenchDB(b)
	db.pool.Config().MaxConns = 32
	s := pgstore.New(db.pool, storage.Options{})
	if os.Getenv("BENCH_GROUP_COMMIT") == "off" {
		pgstore.WithoutGroupCommit(s)
	}
	rev := benchType(b, s)
	ctx := b.Context()
	lead, err := s.BecomeScheduler(ctx, "bench-scheduler", time.Hour, 0)
	if err != nil || !lead.Leader {
		b.Fatalf("become scheduler: %+v %v", lead, err)
	}
	ids := make(chan int64, resources)
	for i := range resources {
		r, err := benchCreate(ctx, s, rev, fmt.Sprintf("r-%07d", i))
		if err != nil {
			b.Fatal(err)
		}
		ids <- r.ID
	}
	var n atomic.Int64
	reconcile := func(id int64) {
		dispatch := fmt.Sprintf("d-%d", n.Add(1))
		if err := storage.RecordDispatch(ctx, s, lead.Epoch, id, dispatch); err != nil {
			b.Error(err)
			return
		}
		l, err := s.AcquireLease(ctx, storage.AcquireLeaseRequest{ResourceID: id, Holder: "bench/a", SchedulerEpoch: lead.Epoch, DispatchID: dispatch})
		if err != nil {
			b.Error(err)
			return
		}
		started := time.Now()
		if _, err := s.CompleteReconcile(ctx, storage.CompleteReconcileRequest{
			ResourceID: id, LeaseEpoch: l.Epoch, Outcome: lifecycle.OutcomeSuccess, Generation: l.Resource.Generation, Observed: true,
			Conditions: []resource.Condition{{Type: "Ready", Status: resource.ConditionTrue, Reason: "Reconciled"}},
			History:    storage.HistoryEntry{Phase: "Ready", StartedAt: &started, Reason: "spec_changed"},
		}); err != nil {
			b.Error(err)
		}
	}
	b.ReportAllocs()
	before := db.sample(b)
	b.SetParallelism(8) // 16 goroutines on 2 cores
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := <-ids
			reconcile(id)
			ids <- id
		}
	})
	b.StopTimer()
	db.sample(b).report(b, before)
}

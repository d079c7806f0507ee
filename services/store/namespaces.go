package store

import (
	"context"
	"log/slog"
	"time"

	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/store/storage"
)

// DefaultNamespaceSweep is how often the store finishes the deletion of
// terminating namespaces.
const DefaultNamespaceSweep = time.Second

// sweepNamespaces finishes the deletion of terminating namespaces until ctx
// ends: every interval it finalizes each terminating namespace
// (storage.Store.FinalizeNamespace), which deletes what a crash left
// undeleted in it and removes it once its resources' finalizers are gone
// (its reconcilers' cleanup done). DeleteNamespace does the first round
// itself; this loop does the rest. Every store replica runs it: finalizing
// is idempotent.
func sweepNamespaces(ctx context.Context, st storage.Store, every time.Duration, log *slog.Logger) {
	if every <= 0 {
		every = DefaultNamespaceSweep
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		list, err := st.ListNamespaces(ctx)
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("namespace sweep: list namespaces", "error", err)
			}
			continue
		}
		for _, n := range list {
			if n.Status != resource.NamespaceTerminating {
				continue
			}
			res, err := st.FinalizeNamespace(ctx, n.Name)
			switch {
			case err != nil && ctx.Err() == nil:
				log.Warn("namespace sweep: finalize", "namespace", n.Name, "error", err)
			case err == nil && res.Purged:
				log.Info("namespace deleted: its last resource is gone", "namespace", n.Name)
			}
		}
	}
}

package registrysync

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/services/internal/httpsource"
	"github.com/no8s/no8s/services/internal/tenancy"
)

// ConditionSynced is a registry's condition: True when its last sync read
// every row and wrote what it had to; False with the reason otherwise.
const ConditionSynced = "Synced"

// waitForSync bounds how long a reconcile waits for the loop's sync.
const waitForSync = 60 * time.Second

// newReconciler is the reconciler of TenantRegistry/v1 and TenantTemplate/v1
// (named registry-sync, run by the leader only). A registry's reconcile
// writes the status of the loop's latest sync of it (conditions, outputs);
// its cleanup waits until the loop has deleted its Tenants. A template's
// reconcile asks the loop for a round (its registry's Tenants follow it);
// its cleanup waits until its Tenants are gone.
func newReconciler(s *syncer) *sdk.Engine[json.RawMessage] {
	return sdk.New[json.RawMessage](leaseName, sdk.Func[json.RawMessage](func(ctx context.Context, req *sdk.Request[json.RawMessage]) (sdk.Result, error) {
		r := req.Resource
		switch r.Type.Name {
		case tenancy.RegistryType:
			return s.reconcileRegistry(ctx, req)
		case httpsource.Type:
			return s.reconcileSource(ctx, req)
		case tenancy.TemplateType:
			s.Kick()
			if !req.Deleting() {
				return sdk.Result{}, nil
			}
			return s.waitNoTenants(ctx, r.Namespace, tenancy.LabelTemplate+"="+r.Name)
		}
		return sdk.Result{}, sdk.Terminalf("registry-sync does not serve %s", r.Type)
	})).WithNotReadyRequeue(5 * time.Second)
}

func (s *syncer) reconcileRegistry(ctx context.Context, req *sdk.Request[json.RawMessage]) (sdk.Result, error) {
	r := req.Resource
	wctx, cancel := context.WithTimeout(ctx, waitForSync)
	defer cancel()
	res := s.waitResult(wctx, key(r), r.Generation, r.Deleting())
	if res == nil {
		return sdk.RequeueAfter(2 * time.Second), nil
	}
	if r.Deleting() {
		return s.waitNoTenants(ctx, r.Namespace, tenancy.LabelRegistry+"="+r.Name)
	}
	return reportSync(req, syncReport{res.summary(), res.At, res.Duration, res.Err, res.Partial, res.Reason, res.Message})
}

// syncReport is what a registry's or an HttpSource's status shows of the
// loop's latest sync of it.
type syncReport struct {
	summary         map[string]any
	at              time.Time
	duration        time.Duration
	err             error
	partial         bool
	reason, message string
}

// reportSync writes a sync's outputs (its summary and times) and the Synced
// condition: a failed read is an error, a partial sync a Degraded result.
func reportSync(req *sdk.Request[json.RawMessage], r syncReport) (sdk.Result, error) {
	r.summary["lastSyncTime"] = r.at.Format(time.RFC3339Nano)
	r.summary["lastSyncDurationMs"] = r.duration.Milliseconds()
	for k, v := range r.summary {
		req.SetOutput(k, v)
	}
	switch {
	case r.err != nil:
		req.MarkFalse(ConditionSynced, r.reason, r.message)
		return sdk.Result{}, fmt.Errorf("sync failed: %s", r.message)
	case r.partial:
		req.MarkFalse(ConditionSynced, r.reason, r.message)
		return sdk.Result{}, sdk.Degraded(errors.New(r.message))
	}
	req.MarkTrue(ConditionSynced, r.reason, r.message)
	return sdk.Result{}, nil
}

// waitNoTenants is done when no Tenant of namespace matches selector, else
// comes back in a second.
func (s *syncer) waitNoTenants(ctx context.Context, namespace, selector string) (sdk.Result, error) {
	s.Kick()
	left, err := s.svc.list(ctx, sdk.Type(tenancy.TenantType, tenancy.Version), namespace, selector)
	if err != nil {
		return sdk.Result{}, err
	}
	if len(left) > 0 {
		return sdk.RequeueAfter(time.Second), nil
	}
	return sdk.Result{}, nil
}

func decodeJSON(raw []byte, v any) error { return json.Unmarshal(raw, v) }

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
	out := res.summary()
	out["lastSyncTime"] = res.At.Format(time.RFC3339Nano)
	out["lastSyncDurationMs"] = res.Duration.Milliseconds()
	for k, v := range out {
		req.SetOutput(k, v)
	}
	switch {
	case res.Err != nil:
		req.MarkFalse(ConditionSynced, res.Reason, res.Message)
		return sdk.Result{}, fmt.Errorf("sync failed: %s", res.Message)
	case res.Partial:
		req.MarkFalse(ConditionSynced, res.Reason, res.Message)
		return sdk.Result{}, sdk.Degraded(errors.New(res.Message))
	}
	req.MarkTrue(ConditionSynced, res.Reason, res.Message)
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

package testkit_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/libs/sdk/testkit"
)

// TestRequestAPICallsAsTheReconciler: the API client a step gets from its
// request (req.API()) reaches the REST API as the reconciler itself, on the
// gateway's service listener with the reconciler's certificate, as a
// deployed worker with NO8S_IDENTITY_DIR does.
func TestRequestAPICallsAsTheReconciler(t *testing.T) {
	env := testkit.Start(t)
	env.CreateType(t, widget.Name, widget.Version, widgetSchema)
	rec := sdk.New("caller", sdk.Func[json.RawMessage](func(ctx context.Context, req *sdk.Request[json.RawMessage]) (sdk.Result, error) {
		if req.Deleting() {
			return sdk.Result{}, nil
		}
		who, err := req.API().WhoAmI(ctx)
		if err != nil {
			return sdk.Result{}, err
		}
		req.SetOutput("caller", who.Username)
		req.SetOutput("method", who.Method)
		return sdk.Result{}, nil
	}))
	env.RunReconciler(t, rec, widget)
	w := env.CreateResource(t, widget, "who", map[string]any{"size": 1})
	w = env.WaitFor(t, w, testkit.Ready(), 20*time.Second)
	if string(w.Outputs) != `{"caller":"service:reconciler/caller","method":"identity"}` {
		t.Fatalf("outputs %s", w.Outputs)
	}
}

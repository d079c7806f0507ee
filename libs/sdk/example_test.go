package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/libs/platform/secret"
	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/libs/sdk/internal/wire"
)

// reconcile runs one attempt of engine on res, as the worker runtime does
// for each work item, and prints what the engine saves. In a reconciler's
// own tests, testkit.Reconcile runs an attempt in memory likewise, and
// testkit.Start a real control plane
// (github.com/no8s/no8s/libs/sdk/testkit).
func reconcile[S any](engine *sdk.Engine[S], res *sdk.Resource, secrets secret.Resolver) wire.Report {
	return engine.Reconcile(context.Background(), &wire.Attempt{Resource: res, Client: printClient{}, Secrets: secrets})
}

// printClient stands in for the store in these examples: it prints what the
// engine saves.
type printClient struct{ wire.ReadWriter }

func (printClient) Status() wire.StatusWriter { return printStatus{} }

type printStatus struct{}

func (printStatus) Complete(_ context.Context, c *wire.Completion) (*wire.Completed, error) {
	fmt.Printf("saved: outcome=%s phase=%s message=%q\n", c.Outcome, c.Phase, c.Message)
	for _, cond := range c.Conditions {
		fmt.Printf("  condition %s=%s (%s, generation %d)\n", cond.Type, cond.Status, cond.Reason, cond.ObservedGeneration)
	}
	if c.Outputs != nil {
		fmt.Printf("  outputs %s\n", c.Outputs)
	}
	if len(c.RemoveFinalizers) > 0 {
		fmt.Printf("  remove finalizers %v\n", c.RemoveFinalizers)
	}
	return &wire.Completed{}, nil
}

// BucketSpec is the spec of an imaginary Bucket type.
type BucketSpec struct {
	Region string     `json:"region"`
	Token  secret.Ref `json:"token"`
}

// ensureBucket creates the bucket unless it exists (a "nothing to do"
// shortcut that req.Force disables).
type ensureBucket struct{ exists map[string]bool }

func (ensureBucket) Name() string { return "ensure-bucket" }

func (s ensureBucket) Do(ctx context.Context, req *sdk.Request[BucketSpec]) (sdk.Result, error) {
	if s.exists[req.Resource.Name] && !req.Force {
		req.MarkTrue("BucketExists", "Found", "")
		return sdk.Result{}, nil
	}
	token, err := req.Secret(ctx, req.Spec.Token)
	if err != nil {
		req.MarkFalse("BucketExists", "NoCredentials", err.Error())
		return sdk.Result{}, err
	}
	_ = token.Reveal() // use it to call the cloud API; never log it
	s.exists[req.Resource.Name] = true
	req.Changes.Created++
	req.MarkTrue("BucketExists", "Created", "")
	req.SetOutput("url", fmt.Sprintf("https://%s.example.com/%s", req.Spec.Region, req.Resource.Name))
	return sdk.Result{}, nil
}

func (s ensureBucket) Cleanup(ctx context.Context, req *sdk.Request[BucketSpec]) (sdk.Result, error) {
	delete(s.exists, req.Resource.Name)
	req.Changes.Deleted++
	return sdk.Result{}, nil
}

func bucket(deleting bool) *sdk.Resource {
	r := &sdk.Resource{
		ID: 1, Name: "photos", Type: sdk.Type("Bucket", "v1"), Generation: 1,
		Spec:       []byte(`{"region":"eu","token":{"env":"BUCKET_TOKEN"}}`),
		Finalizers: []string{names.ReconcilerFinalizer("buckets")},
	}
	if deleting {
		r.DeletedAt = time.Now()
	}
	return r
}

// A reconciler is an Engine with Steps. The worker runtime runs one attempt
// per work item; here reconcile does.
func Example() {
	engine := sdk.New[BucketSpec]("buckets", ensureBucket{exists: map[string]bool{}}).WithConditions("BucketExists")
	env := secret.Local{LookupEnv: func(string) (string, bool) { return "t0ken", true }}

	rep := reconcile(engine, bucket(false), env)
	fmt.Println("outcome:", rep.Outcome)

	// Deleted later: the next attempt starts from what was saved.
	gone := bucket(true)
	gone.Conditions = rep.Completion.Conditions
	rep = reconcile(engine, gone, env)
	fmt.Println("outcome:", rep.Outcome)
	// Output:
	// saved: outcome=success phase=Ready message="reconciled"
	//   condition Ready=True (Reconciled, generation 1)
	//   condition BucketExists=True (Created, generation 1)
	//   outputs {"url":"https://eu.example.com/photos"}
	// outcome: success
	// saved: outcome=success phase=Terminating message="cleanup finished"
	//   condition Ready=False (Deleting, generation 1)
	//   condition BucketExists=True (Created, generation 1)
	//   remove finalizers [reconciler.no8s.io/buckets]
	// outcome: success
}

// A missing secret fails the attempt with an error naming the reference;
// the scheduler retries it with backoff.
func Example_missingSecret() {
	engine := sdk.New[BucketSpec]("buckets", ensureBucket{exists: map[string]bool{}}).WithConditions("BucketExists")
	env := secret.Local{LookupEnv: func(string) (string, bool) { return "", false }}
	rep := reconcile(engine, bucket(false), env)
	fmt.Println(rep.Outcome, errors.Is(rep.Err, secret.ErrNotFound))
	// Output:
	// saved: outcome=error phase=Progressing message="step ensure-bucket: secret reference env \"BUCKET_TOKEN\": secret: not found: environment variable BUCKET_TOKEN is not set in the worker"
	//   condition Ready=False (ReconcileError, generation 1)
	//   condition BucketExists=False (NoCredentials, generation 1)
	// error true
}

// Func turns one function into a reconciler; it runs as Do while the
// resource lives and as Cleanup when it is deleted.
func ExampleFunc() {
	type Spec struct {
		Greeting string `json:"greeting"`
	}
	engine := sdk.New("greeter", sdk.Func[Spec](func(ctx context.Context, req *sdk.Request[Spec]) (sdk.Result, error) {
		if req.Deleting() {
			return sdk.Result{}, nil
		}
		if req.Spec.Greeting == "" {
			return sdk.Result{}, sdk.Terminalf("spec.greeting is empty")
		}
		req.SetOutput("message", strings.ToUpper(req.Spec.Greeting))
		return sdk.Result{}, nil
	}))
	res := &sdk.Resource{ID: 2, Name: "hi", Type: sdk.Type("Greeting", "v1"), Generation: 3,
		Spec: []byte(`{"greeting":""}`), Finalizers: []string{names.ReconcilerFinalizer("greeter")}}
	rep := reconcile(engine, res, nil)
	fmt.Println(rep.Outcome, sdk.IsTerminal(rep.Err))
	// Output:
	// saved: outcome=terminal phase=Progressing message="step reconcile: terminal: spec.greeting is empty"
	//   condition Ready=False (TerminalError, generation 3)
	// terminal true
}

// A step that is not done yet asks to come back; no failure is counted.
func ExampleRequeueAfter() {
	engine := sdk.New("waiter", sdk.StepFuncs[map[string]any]{
		StepName: "wait-for-dns",
		DoFunc: func(ctx context.Context, req *sdk.Request[map[string]any]) (sdk.Result, error) {
			req.MarkFalse("DNSReady", "Propagating", "record not visible yet")
			return sdk.RequeueAfter(10 * time.Second), nil
		},
	})
	res := &sdk.Resource{ID: 3, Name: "site", Type: sdk.Type("Site", "v1"), Generation: 1, Finalizers: []string{names.ReconcilerFinalizer("waiter")}}
	rep := reconcile(engine, res, nil)
	fmt.Println(rep.Outcome, rep.RequeueAfter)
	// Output:
	// saved: outcome=requeue phase=Progressing message="not True: DNSReady (DNSReady: record not visible yet)"
	//   condition Ready=False (Propagating, generation 1)
	//   condition DNSReady=False (Propagating, generation 1)
	// requeue 10s
}

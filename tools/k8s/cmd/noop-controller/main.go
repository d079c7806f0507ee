// Command noop-controller is the Kubernetes peer's controller in the bench: a
// controller-runtime program that reconciles the objects of one custom
// resource (group, version and kind from flags) and, per reconcile, writes
// the object's status once, setting its Ready condition True with the
// generation it saw. It does nothing else, so that what it measures is the
// API server, etcd and the controller machinery, as no8s's noop reconciler
// does on the other side.
//
// Its client is unthrottled by default (--qps -1: client-go then uses no rate
// limiter at all), and --max-concurrent-reconciles sets the worker count.
// With --finalizer NAME it first adds that finalizer to an object that lacks
// it (an update of the object, then the status write: two writes for an
// object's first reconcile), as controllers scaffolded by kubebuilder do,
// so that the bench can show what that pattern costs.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// options are the command's flags.
type options struct {
	kubeconfig    string
	server        string
	token         string
	tokenFile     string
	caFile        string
	insecure      bool
	group         string
	version       string
	kind          string
	namespace     string
	workers       int
	qps           float64
	burst         int
	metricsAddr   string
	healthAddr    string
	reason        string
	printSettings bool
	cachedReads   bool
	finalizer     string
}

func main() {
	var o options
	// A flag set of its own: controller-runtime registers --kubeconfig on
	// the default one.
	fs := flag.NewFlagSet("noop-controller", flag.ExitOnError)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (else --server with --token or --token-file)")
	fs.StringVar(&o.server, "server", "", "API server URL (overrides the kubeconfig's)")
	fs.StringVar(&o.token, "token", "", "bearer token")
	fs.StringVar(&o.tokenFile, "token-file", "", "file holding the bearer token")
	fs.StringVar(&o.caFile, "certificate-authority", "", "CA bundle that signed the API server's certificate")
	fs.BoolVar(&o.insecure, "insecure-skip-tls-verify", false, "do not verify the API server's certificate")
	fs.StringVar(&o.group, "group", "", "API group of the custom resource (required)")
	fs.StringVar(&o.version, "api-version", "v1", "API version of the custom resource")
	fs.StringVar(&o.kind, "kind", "", "kind of the custom resource (required)")
	fs.StringVar(&o.namespace, "namespace", "", "watch only this namespace (default: all)")
	fs.IntVar(&o.workers, "max-concurrent-reconciles", 8, "reconciles run at once (controller-runtime's MaxConcurrentReconciles)")
	fs.Float64Var(&o.qps, "qps", -1, "client queries per second; negative: no client-side rate limit")
	fs.IntVar(&o.burst, "burst", 1_000_000, "client burst (used only with a positive --qps)")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", "0", `metrics listen address ("0": off)`)
	fs.StringVar(&o.healthAddr, "health-probe-bind-address", "", `/healthz and /readyz listen address ("": off)`)
	fs.StringVar(&o.reason, "reason", "Reconciled", "the Ready condition's reason")
	fs.BoolVar(&o.printSettings, "print-settings", true, "print every setting at start")
	fs.BoolVar(&o.cachedReads, "cached-reads", true, "read objects from the informer's cache (false: from the API server, controller-runtime's default for unstructured objects)")
	fs.StringVar(&o.finalizer, "finalizer", "", "add this finalizer to an object lacking it before its status write (an update more per object; empty: none)")
	_ = fs.Parse(os.Args[1:]) // ExitOnError: exits on a bad flag

	ctrl.SetLogger(zap.New())
	if err := run(ctrl.SetupSignalHandler(), o); err != nil {
		fmt.Fprintln(os.Stderr, "noop-controller:", err)
		os.Exit(1)
	}
}

// run starts the manager and blocks until ctx ends.
func run(ctx context.Context, o options) error {
	if o.group == "" || o.kind == "" {
		return errors.New("--group and --kind are required")
	}
	if o.finalizer != "" {
		if errs := validation.IsQualifiedName(o.finalizer); len(errs) > 0 {
			return fmt.Errorf("--finalizer %q: %s", o.finalizer, strings.Join(errs, "; "))
		}
	}
	if o.workers < 1 {
		return fmt.Errorf("--max-concurrent-reconciles %d: must be at least 1", o.workers)
	}
	cfg, err := restConfig(o)
	if err != nil {
		return err
	}
	if o.printSettings {
		fmt.Printf("noop-controller: server=%s group=%s api-version=%s kind=%s namespace=%q max-concurrent-reconciles=%d qps=%g burst=%d cached-reads=%t finalizer=%q\n",
			cfg.Host, o.group, o.version, o.kind, o.namespace, o.workers, cfg.QPS, cfg.Burst, o.cachedReads, o.finalizer)
	}
	mgr, err := newManager(cfg, o)
	if err != nil {
		return err
	}
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	return nil
}

// newManager is the manager of the controller the options describe, on
// cfg, not started.
func newManager(cfg *rest.Config, o options) (ctrl.Manager, error) {
	mopts := ctrl.Options{
		Metrics:                metricsserver.Options{BindAddress: o.metricsAddr},
		HealthProbeBindAddress: o.healthAddr,
		// Reads from the informer's cache, as a typed controller's do: by
		// default controller-runtime reads unstructured objects from the
		// API server, one GET more per reconcile (--cached-reads=false).
		Client: client.Options{Cache: &client.CacheOptions{Unstructured: o.cachedReads}},
	}
	if o.namespace != "" {
		mopts.Cache.DefaultNamespaces = map[string]cache.Config{o.namespace: {}}
	}
	mgr, err := ctrl.NewManager(cfg, mopts)
	if err != nil {
		return nil, fmt.Errorf("new manager: %w", err)
	}
	gvk := schema.GroupVersionKind{Group: o.group, Version: o.version, Kind: o.kind}
	watched := &unstructured.Unstructured{}
	watched.SetGroupVersionKind(gvk)
	r := &reconciler{client: mgr.GetClient(), gvk: gvk, reason: o.reason, finalizer: o.finalizer}
	err = ctrl.NewControllerManagedBy(mgr).
		Named("noop-"+strings.ToLower(o.kind)).
		// A status write changes no generation: without this predicate each
		// write would be reconciled again, forever.
		For(watched, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: o.workers}).
		Complete(r)
	if err != nil {
		return nil, fmt.Errorf("new controller for %s: %w", gvk, err)
	}
	if o.healthAddr != "" {
		if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
			return nil, fmt.Errorf("healthz: %w", err)
		}
		if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
			return nil, fmt.Errorf("readyz: %w", err)
		}
	}
	return mgr, nil
}

// restConfig builds the client's configuration from the flags: a kubeconfig
// if one is named, else the server, token and CA given; the rate limit always
// from --qps and --burst.
func restConfig(o options) (*rest.Config, error) {
	var cfg *rest.Config
	if o.kubeconfig != "" {
		c, err := clientcmd.BuildConfigFromFlags(o.server, o.kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w", o.kubeconfig, err)
		}
		cfg = c
	} else {
		if o.server == "" {
			return nil, errors.New("--kubeconfig or --server is required")
		}
		cfg = &rest.Config{Host: o.server}
	}
	if o.tokenFile != "" {
		b, err := os.ReadFile(o.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("token file: %w", err)
		}
		cfg.BearerToken = strings.TrimSpace(string(b))
	}
	if o.token != "" {
		cfg.BearerToken = o.token
	}
	if o.caFile != "" {
		cfg.CAFile = o.caFile
	}
	if o.insecure {
		cfg.Insecure = true
		cfg.CAFile, cfg.CAData = "", nil
	}
	// client-go builds no rate limiter when QPS is negative.
	cfg.QPS = float32(o.qps)
	cfg.Burst = o.burst
	return cfg, nil
}

// reconciler writes the Ready condition of each object it is handed, after
// adding its finalizer when it has one.
type reconciler struct {
	client    client.Client
	gvk       schema.GroupVersionKind
	reason    string
	finalizer string
}

// Reconcile reads the object from the informer's cache and writes its status once: the
// Ready condition True, observedGeneration the object's generation. With a
// finalizer the object lacks, it first adds it (an update of the object,
// whose answer carries the resourceVersion the status write then uses), and
// removes it from an object being deleted, writing nothing else. A
// conflict (the object changed since the cache saw it) is returned, and the
// request retried with backoff.
func (r *reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(r.gvk)
	if err := r.client.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get %s: %w", req.NamespacedName, err)
	}
	if r.finalizer != "" && obj.GetDeletionTimestamp() != nil {
		// Going (the deletion raised the generation): let it go.
		if controllerutil.RemoveFinalizer(obj, r.finalizer) {
			if err := r.client.Update(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
				return ctrl.Result{}, fmt.Errorf("remove finalizer from %s: %w", req.NamespacedName, err)
			}
		}
		return ctrl.Result{}, nil
	}
	if r.finalizer != "" && controllerutil.AddFinalizer(obj, r.finalizer) {
		if err := r.client.Update(ctx, obj); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer to %s: %w", req.NamespacedName, err)
		}
	}
	if err := setReady(obj, r.reason, time.Now()); err != nil {
		return ctrl.Result{}, fmt.Errorf("%s: %w", req.NamespacedName, err)
	}
	if err := r.client.Status().Update(ctx, obj); err != nil {
		return ctrl.Result{}, fmt.Errorf("status update %s: %w", req.NamespacedName, err)
	}
	return ctrl.Result{}, nil
}

// setReady sets obj's status.conditions entry of type Ready to True with the
// object's generation, keeping the other conditions and, when Ready was
// already True, its lastTransitionTime.
func setReady(obj *unstructured.Unstructured, reason string, now time.Time) error {
	conds, _, err := unstructured.NestedSlice(obj.Object, "status", "conditions")
	if err != nil {
		return fmt.Errorf("status.conditions: %w", err)
	}
	ready := map[string]any{
		"type":               "Ready",
		"status":             "True",
		"observedGeneration": obj.GetGeneration(),
		"lastTransitionTime": now.UTC().Format(time.RFC3339),
		"reason":             reason,
		"message":            "",
	}
	out := make([]any, 0, len(conds)+1)
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != "Ready" {
			out = append(out, c)
			continue
		}
		if m["status"] == "True" {
			if t, ok := m["lastTransitionTime"].(string); ok {
				ready["lastTransitionTime"] = t
			}
		}
	}
	out = append(out, ready)
	if err := unstructured.SetNestedSlice(obj.Object, out, "status", "conditions"); err != nil {
		return fmt.Errorf("set status.conditions: %w", err)
	}
	return nil
}

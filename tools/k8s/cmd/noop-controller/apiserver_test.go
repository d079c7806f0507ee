package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// toolsEnv names the directory holding etcd and kube-apiserver, as
// tools/k8s/build.sh --dir prints it (make k8s-tools-test sets it).
const toolsEnv = "NO8S_K8S_TOOLS"

const testGroup = "test.no8s.io"

// TestReconcileOnAnAPIServer runs the controller against a real
// kube-apiserver and etcd (the ones make k8s-tools builds): an object is
// made Ready at its generation with one status write; with --finalizer it
// carries the finalizer once Ready, and its deletion, held by the
// finalizer, completes once the controller removes it.
func TestReconcileOnAnAPIServer(t *testing.T) {
	dir := os.Getenv(toolsEnv)
	if dir == "" {
		t.Fatalf("%s is unset: run make k8s-tools-test (it names the directory of etcd and kube-apiserver)", toolsEnv)
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: dir,
		CRDs:                  []*apiextensionsv1.CustomResourceDefinition{testCRD("Plain"), testCRD("Held")},
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting etcd and kube-apiserver from %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping the API server: %v", err)
		}
	})
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("one status write", func(t *testing.T) {
		ctx := startController(t, cfg, options{group: testGroup, version: "v1", kind: "Plain", workers: 2, reason: "Reconciled", cachedReads: true})
		obj := create(ctx, t, c, "Plain", "p1")
		got := waitReady(ctx, t, c, obj)
		if f := got.GetFinalizers(); len(f) != 0 {
			t.Errorf("finalizers %v: want none without --finalizer", f)
		}
	})

	t.Run("finalizer", func(t *testing.T) {
		const fin = "bench.no8s.io/noop"
		ctx := startController(t, cfg, options{group: testGroup, version: "v1", kind: "Held", workers: 2, reason: "Reconciled", cachedReads: true, finalizer: fin})
		obj := create(ctx, t, c, "Held", "h1")
		got := waitReady(ctx, t, c, obj)
		if !slices.Contains(got.GetFinalizers(), fin) {
			t.Fatalf("finalizers %v: want %s", got.GetFinalizers(), fin)
		}
		if err := c.Delete(ctx, got); err != nil {
			t.Fatalf("delete: %v", err)
		}
		poll(ctx, t, "the object gone once its finalizer is removed", func() error {
			err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj.DeepCopy())
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err != nil {
				return err
			}
			return fmt.Errorf("still there")
		})
	})
}

// testCRD is a namespaced custom resource of kind with a status
// subresource, the shape of the bench's.
func testCRD(kind string) *apiextensionsv1.CustomResourceDefinition {
	singular := strings.ToLower(kind)
	plural := singular + "s"
	preserve := true
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + testGroup},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: testGroup,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: kind, ListKind: kind + "List", Plural: plural, Singular: singular},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema:       &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &preserve}},
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
			}},
		},
	}
}

// startController starts the controller o describes on cfg until the test
// ends, and returns the test's context.
func startController(t *testing.T, cfg *rest.Config, o options) context.Context {
	t.Helper()
	o.metricsAddr = "0"
	mgr, err := newManager(cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	return ctx
}

// create creates an object of kind named name in the default namespace.
func create(ctx context.Context, t *testing.T, c client.Client, kind, name string) *unstructured.Unstructured {
	t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"n": int64(1)}}}
	obj.SetGroupVersionKind(schema.GroupVersionKind{Group: testGroup, Version: "v1", Kind: kind})
	obj.SetNamespace("default")
	obj.SetName(name)
	if err := c.Create(ctx, obj); err != nil {
		t.Fatalf("create %s %s: %v", kind, name, err)
	}
	return obj
}

// waitReady waits until obj's Ready condition is True at its generation and
// returns the object as read then.
func waitReady(ctx context.Context, t *testing.T, c client.Client, obj *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	got := obj.DeepCopy()
	poll(ctx, t, "Ready True at the object's generation", func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), got); err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, cd := range conds {
			if m, ok := cd.(map[string]any); ok && m["type"] == "Ready" && m["status"] == "True" && m["observedGeneration"] == got.GetGeneration() {
				return nil
			}
		}
		return fmt.Errorf("conditions %v at generation %d", conds, got.GetGeneration())
	})
	return got
}

// poll calls check every 100 ms until it returns nil, failing the test with
// its last error when ctx ends.
func poll(ctx context.Context, t *testing.T, what string, check func() error) {
	t.Helper()
	for {
		err := check()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

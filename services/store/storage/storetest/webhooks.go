package storetest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/no8s/no8s/services/internal/webhookconf"
	"github.com/no8s/no8s/services/store/storage"
)

func hook(name string) webhookconf.Webhook {
	return webhookconf.Webhook{
		Name: name, URL: "http://127.0.0.1:1/" + name, Type: webhookconf.TypeValidating,
		Operations: []string{webhookconf.OpCreate}, TimeoutSeconds: 10, FailurePolicy: webhookconf.PolicyFail,
	}
}

func testWebhookCRUDAndSetVersion(t *testing.T, open Opener) {
	s, _ := newStore(t, open)
	ctx := t.Context()

	empty, err := s.ListWebhooks(ctx, "")
	if err != nil || len(empty.Webhooks) != 0 || empty.SetVersion == "" {
		t.Fatalf("empty list: %+v, %v", empty, err)
	}
	if nm, err := s.ListWebhooks(ctx, empty.SetVersion); err != nil || !nm.NotModified || nm.Webhooks != nil {
		t.Fatalf("unchanged set: %+v, %v", nm, err)
	}

	in := hook("a.example.com")
	in.ResourceTypeName, in.Ordering = "Widget", -3
	a, err := s.CreateWebhook(ctx, in, false)
	if err != nil {
		t.Fatal(err)
	}
	if a.ID == 0 || a.ResourceVersion == 0 || a.ResourceTypeName != "Widget" || a.ResourceTypeVersion != "" || a.Ordering != -3 || a.CreatedAt.IsZero() {
		t.Fatalf("created %+v", a)
	}
	v1 := mustListChanged(t, s, empty.SetVersion, 1)

	_, err = s.CreateWebhook(ctx, hook("a.example.com"), false)
	wantErr(t, err, storage.ErrNameTaken)
	_, err = s.CreateWebhook(ctx, webhookconf.Webhook{Name: "Bad Name"}, false)
	wantErr(t, err, storage.ErrInvalid)
	if _, err := s.CreateWebhook(ctx, hook("dry.example.com"), true); err != nil {
		t.Fatal(err)
	}
	if nm, _ := s.ListWebhooks(ctx, v1); !nm.NotModified {
		t.Fatal("failed and dry-run writes changed the set version")
	}

	b, err := s.CreateWebhook(ctx, hook("b.example.com"), false)
	if err != nil {
		t.Fatal(err)
	}
	v2 := mustListChanged(t, s, v1, 2)

	// An update of a webhook that does not hold the largest revision
	// changes the version too.
	up := *a
	up.FailurePolicy = webhookconf.PolicyIgnore
	a2, err := s.UpdateWebhook(ctx, up, a.ResourceVersion, false)
	if err != nil {
		t.Fatal(err)
	}
	if a2.ResourceVersion <= b.ResourceVersion || a2.FailurePolicy != webhookconf.PolicyIgnore || !a2.CreatedAt.Equal(a.CreatedAt) {
		t.Fatalf("updated %+v", a2)
	}
	v3 := mustListChanged(t, s, v2, 2)
	_, err = s.UpdateWebhook(ctx, up, a.ResourceVersion, false)
	wantErr(t, err, storage.ErrConflict)
	same, err := s.UpdateWebhook(ctx, *a2, 0, false)
	if err != nil || same.ResourceVersion != a2.ResourceVersion {
		t.Fatalf("no-op update: %+v, %v", same, err)
	}
	ren := *a2
	ren.Name = "b.example.com"
	_, err = s.UpdateWebhook(ctx, ren, 0, false)
	wantErr(t, err, storage.ErrNameTaken)
	missing := hook("x.example.com")
	missing.ID = 1 << 40
	_, err = s.UpdateWebhook(ctx, missing, 0, false)
	wantErr(t, err, storage.ErrNotFound)

	// Deleting a webhook that does not hold the largest revision changes
	// the version.
	if err := s.DeleteWebhook(ctx, b.ID, false); err != nil {
		t.Fatal(err)
	}
	mustListChanged(t, s, v3, 1)
	wantErr(t, s.DeleteWebhook(ctx, b.ID, false), storage.ErrNotFound)
	_, err = s.GetWebhook(ctx, b.ID)
	wantErr(t, err, storage.ErrNotFound)
	got, err := s.GetWebhook(ctx, a.ID)
	if err != nil || got.ResourceVersion != a2.ResourceVersion {
		t.Fatalf("get: %+v, %v", got, err)
	}
}

func mustListChanged(t *testing.T, s storage.Store, prev string, n int) string {
	t.Helper()
	res, err := s.ListWebhooks(t.Context(), prev)
	if err != nil {
		t.Fatal(err)
	}
	if res.NotModified || res.SetVersion == prev || len(res.Webhooks) != n {
		t.Fatalf("after a change: not_modified=%v version %q (was %q), %d webhooks, want %d", res.NotModified, res.SetVersion, prev, len(res.Webhooks), n)
	}
	return res.SetVersion
}

// testWebhookSetVersionUnderConcurrentWrites checks that a poller never
// misses a change: after concurrent creates and updates settle, the version
// it last saw differs from the final one unless it saw the final set.
func testWebhookSetVersionUnderConcurrentWrites(t *testing.T, open Opener) {
	s, _ := newStore(t, open)
	ctx := t.Context()
	const writers = 4
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w, err := s.CreateWebhook(ctx, hook(fmt.Sprintf("w%d.example.com", i)), false)
			if err != nil {
				t.Error(err)
				return
			}
			for j := range 5 {
				w.Ordering = j
				if w, err = s.UpdateWebhook(ctx, *w, 0, false); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	seen := map[string]string{}
	for done := false; !done; {
		select {
		case <-finished:
			done = true
		default:
		}
		res, err := s.ListWebhooks(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		fp := ""
		for _, w := range res.Webhooks {
			fp += fmt.Sprintf("%s=%d,", w.Name, w.Ordering)
		}
		if prev, ok := seen[res.SetVersion]; ok && prev != fp {
			t.Fatalf("set version %s describes two sets: %s and %s", res.SetVersion, prev, fp)
		}
		seen[res.SetVersion] = fp
	}
}

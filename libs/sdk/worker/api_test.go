package worker_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/no8s/no8s/libs/sdk/worker"
)

// Without an identity the attempts' API client sends the token, and names
// the reconciler in its User-Agent.
func TestNewAPIClientSendsTheToken(t *testing.T) {
	var auth, agent string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth, agent = r.Header.Get("Authorization"), r.Header.Get("User-Agent")
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"username": "u", "groups": []string{}, "method": "token"})
	}))
	defer srv.Close()
	api, err := worker.NewAPIClient(srv.URL, "t0ken", nil, "widgets")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.WhoAmI(t.Context()); err != nil {
		t.Fatal(err)
	}
	if auth != "Bearer t0ken" || agent != "no8s-reconciler-widgets" {
		t.Fatalf("Authorization %q, User-Agent %q", auth, agent)
	}
	if _, err := worker.NewAPIClient("ftp://x", "", nil, "widgets"); err == nil {
		t.Fatal("an ftp URL was taken")
	}
}

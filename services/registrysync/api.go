package registrysync

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/no8s/no8s/libs/api/fence"
	"github.com/no8s/no8s/services/internal/leader"
	"github.com/no8s/no8s/services/registrysync/setsync"
)

// api is registry-sync's client of the public REST API: every write carries
// the leader's fence (lease registry-sync, the term's epoch), which the store
// checks where the write commits.
type api struct {
	base string
	http *http.Client
}

// apiError is an error answer of the API.
type apiError struct {
	Status int
	Code   string `json:"code"`
	Detail string `json:"detail"`
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Detail) }

// errDeposed wraps a write refused for a stale epoch: the sync stops
// (setsync.ErrStop) and the term ends (leader.ErrStale).
var errDeposed = fmt.Errorf("registry-sync: deposed (%w, %w)", setsync.ErrStop, leader.ErrStale)

// call sends one request; epoch 0 sends no fence.
func (a *api) call(ctx context.Context, method, path string, epoch int64, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if epoch > 0 {
		req.Header.Set(fence.HeaderLease, leaseName)
		req.Header.Set(fence.HeaderEpoch, strconv.FormatInt(epoch, 10))
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		ae := &apiError{Status: resp.StatusCode}
		_ = json.Unmarshal(raw, ae)
		if ae.Code == "stale_epoch" {
			return fmt.Errorf("%s %s: %w: %s", method, path, errDeposed, ae.Detail)
		}
		return fmt.Errorf("%s %s: %w", method, path, ae)
	}
	if out != nil {
		return json.Unmarshal(raw, out)
	}
	return nil
}

// isCode reports whether err is an API answer with code.
func isCode(err error, code string) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.Code == code
}

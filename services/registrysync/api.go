package registrysync

import (
	"fmt"
	"strconv"
	"time"

	"github.com/no8s/no8s/libs/api/fence"
	apiclient "github.com/no8s/no8s/libs/client"
	"github.com/no8s/no8s/libs/platform/identity"
	"github.com/no8s/no8s/services/internal/authz"
	"github.com/no8s/no8s/services/internal/leader"
	"github.com/no8s/no8s/services/registrysync/setsync"
)

// newAPI returns registry-sync's client of the public REST API, presenting
// creds (when not nil) to the gateway's service listener at an https base.
// Writes are not retried by the client: a sync that fails is the next
// sync's work.
func newAPI(base string, creds *identity.Credentials) (*apiclient.Client, error) {
	c, err := apiclient.New(base, apiclient.WithTimeout(30*time.Second), apiclient.WithRetries(0), apiclient.WithUserAgent("no8s-registry-sync"),
		apiclient.WithHTTPClient(authz.GatewayHTTPClient(creds, base)))
	if err != nil {
		return nil, fmt.Errorf("registry-sync: --api-url: %w", err)
	}
	return c, nil
}

// fenced are the call options of a write in the term of epoch: the
// leader's fence (lease registry-sync, the term's epoch), which the store
// checks where the write commits.
func fenced(epoch int64) []apiclient.CallOption {
	return []apiclient.CallOption{
		apiclient.WithHeader(fence.HeaderLease, leaseName),
		apiclient.WithHeader(fence.HeaderEpoch, strconv.FormatInt(epoch, 10)),
	}
}

// errDeposed wraps a write refused for a stale epoch: the sync stops
// (setsync.ErrStop) and the term ends (leader.ErrStale).
var errDeposed = fmt.Errorf("registry-sync: deposed (%w, %w)", setsync.ErrStop, leader.ErrStale)

// deposed turns the store's stale_epoch refusal into errDeposed.
func deposed(err error) error {
	if e := apiclient.AsError(err); e != nil && e.Code == apiclient.CodeStaleEpoch {
		return fmt.Errorf("%w: %s", errDeposed, e.Detail)
	}
	return err
}

// write runs one fenced write of the term, refused at once when the term
// is no longer known valid.
func (s *syncer) write(op func(fence ...apiclient.CallOption) error) error {
	if !s.term.Valid() {
		return errDeposed
	}
	return deposed(op(fenced(s.term.Epoch)...))
}

// ignoreGone is err unless it says the resource is already gone.
func ignoreGone(err error) error {
	if apiclient.IsNotFound(err) {
		return nil
	}
	return err
}

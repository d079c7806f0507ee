package client

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrDeleted is returned by Wait when the resource was deleted while being
// waited for.
var ErrDeleted = errors.New("the resource was deleted")

// WaitOptions tune the Wait helpers. The wait ends with ctx: give it a
// deadline.
type WaitOptions struct {
	// Interval is the pause between reads (default 250 ms).
	Interval time.Duration
	// Progress, when set, is called with the resource after every read
	// that did not end the wait.
	Progress func(r *Resource)
}

func (o WaitOptions) interval() time.Duration {
	if o.Interval <= 0 {
		return 250 * time.Millisecond
	}
	return o.Interval
}

// ConditionMet reports whether r has the condition condType with status
// ("True", "False" or "Unknown") for its current generation.
func ConditionMet(r *Resource, condType, status string) bool {
	cd := r.Condition(condType)
	if cd == nil || cd.Status != status {
		return false
	}
	return cd.ObservedGeneration == 0 || cd.ObservedGeneration >= r.Generation
}

// Wait reads the resource with id until done says it is done, and returns
// it. It fails with ErrDeleted when the resource goes away, and with ctx's
// error when ctx ends first; failed reads the client would retry are
// retried until then.
func (c *Client) Wait(ctx context.Context, id int64, done func(*Resource) bool, o WaitOptions) (*Resource, error) {
	for {
		r, err := c.GetResourceByID(ctx, id)
		switch {
		case IsNotFound(err):
			return nil, fmt.Errorf("resource %d: %w", id, ErrDeleted)
		case err != nil && (ctx.Err() != nil || !transient(err)):
			return nil, err
		case err == nil && done(r):
			return r, nil
		case err == nil && o.Progress != nil:
			o.Progress(r)
		}
		if err := sleep(ctx, o.interval()); err != nil {
			return r, err
		}
	}
}

// WaitDeleted waits until the resource with id is gone (purged); one
// already gone counts as deleted.
func (c *Client) WaitDeleted(ctx context.Context, id int64, o WaitOptions) error {
	_, err := c.Wait(ctx, id, func(*Resource) bool { return false }, o)
	if errors.Is(err, ErrDeleted) {
		return nil
	}
	return err
}

// WaitDeletedByName is WaitDeleted for a resource named by type, version,
// namespace and name; one already gone (or never there) counts as
// deleted, as kubectl wait --for=delete has it.
func (c *Client) WaitDeletedByName(ctx context.Context, typeName, version, namespace, name string, o WaitOptions) error {
	r, err := c.GetResource(ctx, typeName, version, namespace, name)
	if IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return c.WaitDeleted(ctx, r.ID, o)
}

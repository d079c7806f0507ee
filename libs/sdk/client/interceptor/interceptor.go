package interceptor

import (
	"context"

	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/libs/sdk/internal/wire"
)

// Funcs replaces methods of the wrapped client.
type Funcs struct {
	Get              func(ctx context.Context, next wire.Client, id int64) (*sdk.Resource, error)
	GetByName        func(ctx context.Context, next wire.Client, t sdk.TypeRef, namespace, name string) (*sdk.Resource, error)
	List             func(ctx context.Context, next wire.Client, opts wire.ListOptions) (*wire.ResourceList, error)
	UpdateFinalizers func(ctx context.Context, next wire.Client, id int64, add, remove []string) (*sdk.Resource, error)
	Complete         func(ctx context.Context, next wire.StatusWriter, c *wire.Completion) (*wire.Completed, error)
}

// New wraps c.
func New(c wire.Client, f Funcs) wire.Client { return &client{next: c, f: f} }

type client struct {
	next wire.Client
	f    Funcs
}

func (c *client) Get(ctx context.Context, id int64) (*sdk.Resource, error) {
	if c.f.Get != nil {
		return c.f.Get(ctx, c.next, id)
	}
	return c.next.Get(ctx, id)
}

func (c *client) GetByName(ctx context.Context, t sdk.TypeRef, namespace, name string) (*sdk.Resource, error) {
	if c.f.GetByName != nil {
		return c.f.GetByName(ctx, c.next, t, namespace, name)
	}
	return c.next.GetByName(ctx, t, namespace, name)
}

func (c *client) List(ctx context.Context, opts wire.ListOptions) (*wire.ResourceList, error) {
	if c.f.List != nil {
		return c.f.List(ctx, c.next, opts)
	}
	return c.next.List(ctx, opts)
}

func (c *client) UpdateFinalizers(ctx context.Context, id int64, add, remove []string) (*sdk.Resource, error) {
	if c.f.UpdateFinalizers != nil {
		return c.f.UpdateFinalizers(ctx, c.next, id, add, remove)
	}
	return c.next.UpdateFinalizers(ctx, id, add, remove)
}

func (c *client) Status() wire.StatusWriter { return status{c} }

type status struct{ c *client }

func (s status) Complete(ctx context.Context, comp *wire.Completion) (*wire.Completed, error) {
	if s.c.f.Complete != nil {
		return s.c.f.Complete(ctx, s.c.next.Status(), comp)
	}
	return s.c.next.Status().Complete(ctx, comp)
}

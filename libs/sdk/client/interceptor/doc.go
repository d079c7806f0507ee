// Package interceptor wraps the worker runtime's real store client (the
// SDK's internal wire.Client, as worker.WithClientWrapper hands it over) so
// that tests of the SDK and its test kit can inject
// faults or observe calls (after controller-runtime's
// pkg/client/interceptor): each non-nil function replaces one method and
// receives the wrapped client to delegate to.
//
//	wrap := func(c wire.Client) wire.Client {
//		return interceptor.New(c, interceptor.Funcs{
//			Complete: func(ctx context.Context, next wire.StatusWriter, c *wire.Completion) (*wire.Completed, error) {
//				if failOnce.CompareAndSwap(false, true) {
//					return nil, wire.ErrUnavailable
//				}
//				return next.Complete(ctx, c)
//			},
//		})
//	}
//	worker.New(engine, cfg, worker.WithClientWrapper(wrap))
package interceptor

// Package interceptor wraps a real sdk.Client so that tests can inject
// faults or observe calls (after controller-runtime's
// pkg/client/interceptor): each non-nil function replaces one method and
// receives the wrapped client to delegate to.
//
//	wrap := func(c sdk.Client) sdk.Client {
//		return interceptor.New(c, interceptor.Funcs{
//			Complete: func(ctx context.Context, next sdk.StatusWriter, c *sdk.Completion) (*sdk.Completed, error) {
//				if failOnce.CompareAndSwap(false, true) {
//					return nil, sdk.ErrUnavailable
//				}
//				return next.Complete(ctx, c)
//			},
//		})
//	}
//	worker.New(engine, cfg, worker.WithClientWrapper(wrap))
package interceptor

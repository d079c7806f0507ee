package authz

import (
	"context"
	"fmt"
	"log/slog"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/no8s/no8s/libs/platform/identity"
)

// Mode is what an Authorizer does with a call the policy refuses.
type Mode string

// The modes.
const (
	// Enforce refuses the call: Unauthenticated without a verified client
	// certificate, PermissionDenied for a method or an object outside the
	// caller's rights.
	Enforce Mode = "enforce"
	// AuditOnly lets the call through and logs, at WARN, what Enforce
	// would have refused: for turning identities on in a running
	// installation and reading what would break first.
	AuditOnly Mode = "audit-only"
)

// ParseMode reads a mode by name ("" is Enforce).
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case "", Enforce:
		return Enforce, nil
	case AuditOnly:
		return AuditOnly, nil
	}
	return "", fmt.Errorf("authz: unknown mode %q (want %s or %s)", s, Enforce, AuditOnly)
}

// Authorizer enforces the policy on one gRPC server.
type Authorizer struct {
	mode   Mode
	log    *slog.Logger
	policy map[string]Rule
}

// New returns an Authorizer of Policy in mode, logging refusals to log.
func New(mode Mode, log *slog.Logger) *Authorizer {
	return &Authorizer{mode: mode, log: log, policy: Policy()}
}

// ServerOptions are the interceptors that authorise every unary and
// streaming call. They go first in the server's chain, so that nothing
// runs for a caller that is refused.
func (a *Authorizer) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(a.unary), grpc.ChainStreamInterceptor(a.stream)}
}

func (a *Authorizer) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	ctx, err := a.authorize(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

func (a *Authorizer) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx, err := a.authorize(ss.Context(), info.FullMethod)
	if err != nil {
		return err
	}
	return handler(srv, &authorizedStream{ServerStream: ss, ctx: ctx})
}

// authorizedStream is a server stream whose context carries the caller.
type authorizedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *authorizedStream) Context() context.Context { return s.ctx }

// authorize checks method against the caller's identity and returns the
// context the handler runs in, carrying the caller.
func (a *Authorizer) authorize(ctx context.Context, method string) (context.Context, error) {
	id, err := peerID(ctx)
	if err != nil {
		if a.mode == AuditOnly {
			a.log.WarnContext(ctx, "authz audit: would refuse a caller without an identity", "method", method, "error", err)
			return ctx, nil
		}
		return ctx, status.Errorf(codes.Unauthenticated, "%s needs a client certificate from the installation's CA: %v", method, err)
	}
	ctx = context.WithValue(ctx, callerKey{}, caller{id: id, a: a})
	rule, ok := a.policy[method]
	if ok && rule.Allows(id) {
		return ctx, nil
	}
	why := fmt.Sprintf("%s may not call %s (allowed: %s)", id, method, rule.Callers())
	if !ok {
		why = fmt.Sprintf("%s may not call %s: the method is in no rule of the policy, refused to every caller", id, method)
	}
	if a.mode == AuditOnly {
		a.log.WarnContext(ctx, "authz audit: would refuse", "identity", id.String(), "method", method, "reason", why)
		return ctx, nil
	}
	a.log.InfoContext(ctx, "refused", "identity", id.String(), "method", method)
	return ctx, status.Error(codes.PermissionDenied, why)
}

// peerID is the identity of the certificate the caller presented on the
// call's connection.
func peerID(ctx context.Context) (identity.ID, error) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return identity.ID{}, fmt.Errorf("no peer on the call")
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return identity.ID{}, fmt.Errorf("the connection is not TLS")
	}
	return identity.PeerID(info.State)
}

type callerKey struct{}

type caller struct {
	id identity.ID
	// a is the gRPC server's Authorizer; nil for a caller put in by
	// WithCaller (the gateway's REST rules hold it instead).
	a *Authorizer
}

// Caller is the identity of the call's caller, put in its context by an
// Authorizer (or by WithCaller); ok is false on a server without one
// (identities off) and for an anonymous REST request.
func Caller(ctx context.Context) (id identity.ID, ok bool) {
	c, ok := ctx.Value(callerKey{}).(caller)
	return c.id, ok
}

// Deny is the answer to a caller acting outside its identity's rights on
// what a method reaches (another reconciler's lease, a type its
// certificate does not claim): a PermissionDenied status naming why, or,
// in AuditOnly mode, nil after logging why (the call goes on). Without an
// Authorizer on the server, Deny returns nil: there is no identity to hold
// the caller to.
func Deny(ctx context.Context, method, format string, args ...any) error {
	c, ok := ctx.Value(callerKey{}).(caller)
	if !ok || c.a == nil {
		return nil
	}
	why := fmt.Sprintf(format, args...)
	if c.a.mode == AuditOnly {
		c.a.log.WarnContext(ctx, "authz audit: would refuse", "identity", c.id.String(), "method", method, "reason", why)
		return nil
	}
	c.a.log.InfoContext(ctx, "refused", "identity", c.id.String(), "method", method, "reason", why)
	return status.Errorf(codes.PermissionDenied, "%s: %s", c.id, why)
}

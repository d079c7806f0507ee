// Package authztest calls every gRPC method a no8s process serves, for the
// tests that check the policy (package authz) cell by cell: in-process
// against bare handlers, and end to end against the real services.
package authztest

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"

	// The served services' descriptors register when their packages are
	// linked in.
	_ "google.golang.org/grpc/health/grpc_health_v1"
	_ "google.golang.org/grpc/reflection/grpc_reflection_v1"
	_ "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"

	_ "github.com/no8s/no8s/proto/gen/no8s/admission/v1"
	_ "github.com/no8s/no8s/proto/gen/no8s/reconcile/v1"
	_ "github.com/no8s/no8s/proto/gen/no8s/store/v1"
)

// Served returns every method of every service a no8s process serves, by
// full method name: the no8s services found in the registered descriptors
// (a new service in proto/ is found without being named here), the health
// service and server reflection.
func Served() map[string]protoreflect.MethodDescriptor {
	out := map[string]protoreflect.MethodDescriptor{}
	protoregistry.GlobalFiles.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		pkg := string(fd.Package())
		if !strings.HasPrefix(pkg, "no8s.") && pkg != "grpc.health.v1" && !strings.HasPrefix(pkg, "grpc.reflection.") {
			return true
		}
		for i := range fd.Services().Len() {
			sd := fd.Services().Get(i)
			for j := range sd.Methods().Len() {
				md := sd.Methods().Get(j)
				out["/"+string(sd.FullName())+"/"+string(md.Name())] = md
			}
		}
		return true
	})
	return out
}

// Sorted returns the methods' names in order.
func Sorted(methods map[string]protoreflect.MethodDescriptor) []string {
	names := make([]string, 0, len(methods))
	for m := range methods {
		names = append(names, m)
	}
	slices.Sort(names)
	return names
}

// Call makes one call of method with an empty request and returns the
// status it got: a unary call's answer, a streaming call's first message
// (or its refusal).
func Call(ctx context.Context, conn *grpc.ClientConn, method string, md protoreflect.MethodDescriptor) *status.Status {
	in := dynamicpb.NewMessage(md.Input())
	out := dynamicpb.NewMessage(md.Output())
	if !md.IsStreamingClient() && !md.IsStreamingServer() {
		return status.Convert(conn.Invoke(ctx, method, in, out))
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: md.IsStreamingServer(), ClientStreams: md.IsStreamingClient()}, method)
	if err != nil {
		return status.Convert(err)
	}
	if err := s.SendMsg(in); err != nil && !errors.Is(err, io.EOF) {
		return status.Convert(err)
	}
	if md.IsStreamingClient() {
		if err := s.CloseSend(); err != nil {
			return status.Convert(err)
		}
	}
	return status.Convert(s.RecvMsg(out))
}

// RefusedByPolicy reports whether st is the policy's refusal of a method
// to the caller (authz's interceptor), as opposed to a handler's answer,
// a handler's own PermissionDenied (authz.Deny) included.
func RefusedByPolicy(st *status.Status) bool {
	return (st.Code() == codes.PermissionDenied && strings.Contains(st.Message(), " may not call ")) || st.Code() == codes.Unauthenticated
}

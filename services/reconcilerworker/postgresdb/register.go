package postgresdb

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
)

// RegisterType creates the PostgresDatabase/v1 resource type in the store at
// storeAddr when it does not exist yet (an existing one is left as it is).
// The same can be done through the API:
//
//	curl -X POST http://localhost:8000/api/v1/resource-types -H 'Content-Type: application/json' \
//	  -d '{"name": "PostgresDatabase", "version": "v1", "schema": <Schema>}'
func RegisterType(ctx context.Context, storeAddr string) error {
	conn, err := grpc.NewClient(storeAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("store at %s: %w", storeAddr, err)
	}
	defer conn.Close()
	st := storev1.NewStoreServiceClient(conn)
	_, err = st.GetResourceType(ctx, &storev1.GetResourceTypeRequest{Name: Type.Name, Version: Type.Version})
	if err == nil {
		return nil
	}
	if status.Code(err) != codes.NotFound {
		return fmt.Errorf("look up resource type %s: %w", Type, err)
	}
	_, err = st.CreateResourceType(ctx, &storev1.CreateResourceTypeRequest{ResourceType: &storev1.ResourceType{
		Name: Type.Name, Version: Type.Version, Description: Description, Schema: []byte(Schema),
	}})
	if err != nil && status.Code(err) != codes.AlreadyExists {
		return fmt.Errorf("register resource type %s: %w", Type, err)
	}
	return nil
}

package worker_test

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/nats-io/nats.go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/no8s/no8s/libs/sdk"
	"github.com/no8s/no8s/libs/sdk/worker"
)

type WidgetSpec struct {
	Size int `json:"size"`
}

// The whole main of a reconciler binary: configuration from the
// environment (NATS_URL, NO8S_STORE_ADDR, NO8S_HEALTH_LISTEN, ...), probes on
// :8081, SIGTERM drains.
func ExampleMain() {
	engine := sdk.New("widgets", sdk.Func[WidgetSpec](func(ctx context.Context, req *sdk.Request[WidgetSpec]) (sdk.Result, error) {
		req.MarkTrue("Sized", "Sized", "")
		return sdk.Result{}, nil
	}))
	worker.Main(engine, sdk.Type("Widget", "v1"))
}

// Wiring the runtime by hand, to choose the connections and options.
func ExampleNew() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		panic(err)
	}
	defer nc.Close()
	conn, err := grpc.NewClient("127.0.0.1:7001", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	engine := sdk.New("widgets", sdk.Func[WidgetSpec](func(ctx context.Context, req *sdk.Request[WidgetSpec]) (sdk.Result, error) {
		return sdk.Result{}, nil
	}))
	w, err := worker.New(engine, worker.Config{Types: []sdk.TypeRef{sdk.Type("Widget", "v1")}, NATS: nc, Store: conn},
		worker.WithMaxConcurrency(16), worker.WithLogger(slog.Default()))
	if err != nil {
		panic(err) // errors.Is(err, worker.ErrInvalidConfig) / worker.ErrInvalidOption
	}
	go func() { _ = http.ListenAndServe(":8081", w.Handler()) }()
	if err := w.Run(ctx); err != nil {
		panic(err) // errors.Is(err, worker.ErrTypeTaken): another reconciler serves Widget/v1
	}
}

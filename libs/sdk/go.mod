module github.com/no8s/no8s/libs/sdk

go 1.26.0

require (
	github.com/google/go-github/v93 v93.0.0
	github.com/nats-io/nats.go v1.55.0
	github.com/no8s/no8s/libs/api v0.0.0
	github.com/no8s/no8s/libs/client v0.0.0
	github.com/no8s/no8s/proto v0.0.0
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260817212433-ac3dfec99bb1
	google.golang.org/grpc v1.85.0
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/google/go-querystring v1.2.0 // indirect
	github.com/klauspost/compress v1.20.0 // indirect
	github.com/nats-io/nkeys v0.4.16 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	golang.org/x/crypto v0.57.0 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
)

replace (
	github.com/no8s/no8s/libs/api => ../api
	github.com/no8s/no8s/libs/client => ../client
	github.com/no8s/no8s/proto => ../../proto
)

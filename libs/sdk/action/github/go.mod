module github.com/no8s/no8s/libs/sdk/action/github

go 1.26.0

require (
	github.com/google/go-github/v93 v93.0.0
	github.com/no8s/no8s/libs/platform v0.0.0
	github.com/no8s/no8s/libs/sdk v0.0.0
	github.com/prometheus/client_golang v1.25.0
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/google/go-querystring v1.2.0 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/no8s/no8s/libs/api v0.0.0 // indirect
	github.com/pandatix/go-abnf v0.5.3 // indirect
	github.com/prometheus/client_model v0.6.3 // indirect
	github.com/prometheus/common v0.73.1 // indirect
	github.com/prometheus/procfs v0.22.0 // indirect
	golang.org/x/net v0.61.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260928230214-8a89bd6388cc // indirect
	google.golang.org/grpc v1.85.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

replace (
	github.com/no8s/no8s/libs/api => ../../../api
	github.com/no8s/no8s/libs/client => ../../../client
	github.com/no8s/no8s/libs/platform => ../../../platform
	github.com/no8s/no8s/libs/sdk => ../..
	github.com/no8s/no8s/proto => ../../../../proto
)

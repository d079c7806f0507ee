module github.com/no8s/no8s/libs/client

go 1.26.0

require github.com/no8s/no8s/libs/api v0.0.0

replace github.com/no8s/no8s/libs/api => ../api

module github.com/no8s/no8s/libs/api

go 1.26.0

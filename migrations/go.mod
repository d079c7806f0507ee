module github.com/no8s/no8s/migrations

go 1.26.0

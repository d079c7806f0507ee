package secret_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/no8s/no8s/libs/platform/secret"
)

func ExampleRef() {
	var spec struct {
		Host     string     `json:"host"`
		Password secret.Ref `json:"password"`
	}
	_ = json.Unmarshal([]byte(`{"host":"db1","password":{"env":"DB1_PASSWORD"}}`), &spec)

	// A worker started with DB1_PASSWORD=hunter2 in its environment:
	resolver := secret.Local{LookupEnv: func(name string) (string, bool) { return "hunter2", name == "DB1_PASSWORD" }}
	pw, err := resolver.Resolve(context.Background(), spec.Password)
	if err != nil {
		panic(err)
	}
	fmt.Println(spec.Password, pw, len(pw.Reveal()))

	_, err = resolver.Resolve(context.Background(), secret.File("/run/secrets/none"))
	fmt.Println(err)
	// Output:
	// env "DB1_PASSWORD" [redacted] 7
	// secret reference file "/run/secrets/none": secret: not found: no such file
}

package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/libs/client"
	"github.com/no8s/no8s/services/internal/manifest"
)

// typeRef is a resource type named on the command line: Name or
// Name/version.
type typeRef struct{ name, version string }

func (t typeRef) String() string {
	if t.version == "" {
		return t.name
	}
	return t.name + "/" + t.version
}

// parseTypeRef reads TYPE or TYPE/VERSION.
func parseTypeRef(arg string) (typeRef, error) {
	name, version, _ := strings.Cut(arg, "/")
	if fe := names.TypeName("", name); fe != nil {
		return typeRef{}, usagef("%q is not a resource type: %s (use types, webhooks, resources, or a type such as DatabaseCluster/v1)", arg, fe.Message)
	}
	if version != "" {
		if fe := names.TypeVersion("", version); fe != nil {
			return typeRef{}, usagef("%q: %s", arg, fe.Message)
		}
	}
	return typeRef{name: name, version: version}, nil
}

// resolveVersion fills in the version of a type named without one: the
// only version registered, else an error naming the choices.
func resolveVersion(ctx context.Context, c *client.Client, t typeRef) (typeRef, error) {
	if t.version != "" {
		return t, nil
	}
	types, err := c.ListTypes(ctx, t.name)
	if err != nil {
		return t, err
	}
	var versions []string
	for _, ty := range types {
		if ty.Name == t.name {
			versions = append(versions, ty.Version)
		}
	}
	slices.Sort(versions)
	switch len(versions) {
	case 0:
		return t, fmt.Errorf("there is no resource type %s (no8s get types lists them)", t.name)
	case 1:
		t.version = versions[0]
		return t, nil
	}
	return t, fmt.Errorf("resource type %s has the versions %s: name one, as %s/%s", t.name, strings.Join(versions, ", "), t.name, versions[0])
}

// target reads TYPE[/VERSION] NAME and the resource it names.
func (a *app) target(ctx context.Context, c *client.Client, args []string) (*client.Resource, error) {
	t, err := parseTypeRef(args[0])
	if err != nil {
		return nil, err
	}
	if fe := names.Name("", args[1]); fe != nil {
		return nil, usagef("%q: %s", args[1], fe.Message)
	}
	if t, err = resolveVersion(ctx, c, t); err != nil {
		return nil, err
	}
	return c.GetResource(ctx, t.name, t.version, a.namespace(), args[1])
}

// exactArgs is cobra.ExactArgs with a usage error.
func exactArgs(n int, what string) func(cmdArgs []string) error {
	return func(args []string) error {
		if len(args) != n {
			return usagef("expected %s, got %d argument(s)", what, len(args))
		}
		return nil
	}
}

// typeExists fails unless the type (in the version, when named) is
// registered.
func typeExists(ctx context.Context, c *client.Client, t typeRef) error {
	types, err := c.ListTypes(ctx, t.name)
	if err != nil {
		return err
	}
	for _, ty := range types {
		if ty.Name == t.name && (t.version == "" || ty.Version == t.version) {
			return nil
		}
	}
	return fmt.Errorf("there is no resource type %s (no8s get types lists them)", t)
}

// key names a resource in messages: "Type/version namespace/name".
func key(r *client.Resource) string {
	return manifest.ResourceKey(r.ResourceTypeName, r.ResourceTypeVersion, r.Namespace, r.Name)
}

package gateway

import (
	"net/http"

	"github.com/labstack/echo/v5"

	"github.com/no8s/no8s/libs/api/names"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/internal/problem"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/internal/resourcepb"
)

// createNamespaceBody is the body of POST /api/v1/namespaces.
type createNamespaceBody struct {
	Name string `json:"name"`
}

// namespaceName reads the {name} path parameter: a namespace's name.
func namespaceName(c *echo.Context) (string, error) {
	name := c.Param("name")
	if fe := names.Namespace("/name", name); fe != nil {
		return "", problem.New(problem.Invalid, problem.CodeInvalid, "%s", fe.Message).WithFields(*fe)
	}
	return name, nil
}

func (s *Service) createNamespace(c *echo.Context) error {
	dry, err := dryRun(c)
	if err != nil {
		return err
	}
	var body createNamespaceBody
	if err := decodeJSONBody(c, &body); err != nil {
		return err
	}
	if fe := names.Namespace("/name", body.Name); fe != nil {
		return fieldsError("invalid namespace", []problem.FieldError{*fe})
	}
	resp, err := call(s, c, s.store.CreateNamespace, &storev1.CreateNamespaceRequest{Name: body.Name, DryRun: dry})
	if err != nil {
		return err
	}
	if !dry {
		c.Response().Header().Set(echo.HeaderLocation, "/api/v1/namespaces/"+body.Name)
	}
	return writeJSON(c, http.StatusCreated, resourcepb.NamespaceFromProto(resp.GetNamespace()))
}

func (s *Service) listNamespaces(c *echo.Context) error {
	resp, err := call(s, c, s.store.ListNamespaces, &storev1.ListNamespacesRequest{})
	if err != nil {
		return err
	}
	out := make([]*resource.Namespace, 0, len(resp.GetNamespaces()))
	for _, n := range resp.GetNamespaces() {
		out = append(out, resourcepb.NamespaceFromProto(n))
	}
	return writeJSON(c, http.StatusOK, out)
}

func (s *Service) getNamespace(c *echo.Context) error {
	name, err := namespaceName(c)
	if err != nil {
		return err
	}
	resp, err := call(s, c, s.store.GetNamespace, &storev1.GetNamespaceRequest{Name: name})
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, resourcepb.NamespaceFromProto(resp.GetNamespace()))
}

// deleteNamespace answers 202 with the namespace terminating: its resources
// are being deleted through their finalizers, and the namespace goes with
// the last of them (at once when it had none).
func (s *Service) deleteNamespace(c *echo.Context) error {
	name, err := namespaceName(c)
	if err != nil {
		return err
	}
	dry, err := dryRun(c)
	if err != nil {
		return err
	}
	resp, err := call(s, c, s.store.DeleteNamespace, &storev1.DeleteNamespaceRequest{Name: name, DryRun: dry})
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusAccepted, resourcepb.NamespaceFromProto(resp.GetNamespace()))
}

package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v5"

	"github.com/no8s/no8s/libs/api/names"
	admissionv1 "github.com/no8s/no8s/proto/gen/no8s/admission/v1"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/internal/problem"
	"github.com/no8s/no8s/services/internal/resource"
	"github.com/no8s/no8s/services/internal/resourcepb"
)

// createTypeBody is the body of POST /api/v1/resource-types.
type createTypeBody struct {
	Name        string          `json:"name"`
	Version     string          `json:"version"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	// ReconcilePolicy is optional (handler_reconcile.go).
	ReconcilePolicy *policyBody `json:"reconcile_policy"`
}

// updateTypeBody is the body of PUT /api/v1/resource-types/{id}. Name and
// version may be repeated but not changed.
type updateTypeBody struct {
	Name        *string         `json:"name"`
	Version     *string         `json:"version"`
	Description *string         `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	// ReconcilePolicy, when given, replaces the policy.
	ReconcilePolicy *policyBody `json:"reconcile_policy"`
}

func checkSchemaShape(raw json.RawMessage, required bool) []problem.FieldError {
	switch {
	case isNull(raw):
		if required {
			return []problem.FieldError{{Path: "/schema", Message: "schema is required"}}
		}
	case !isObject(raw):
		return []problem.FieldError{{Path: "/schema", Message: "must be a JSON object"}}
	case len(raw) > names.MaxSchemaBytes:
		return []problem.FieldError{{Path: "/schema", Message: fmt.Sprintf("schema is %d bytes, more than the %d allowed", len(raw), names.MaxSchemaBytes)}}
	}
	return nil
}

// checkSchema asks admission whether the schema compiles.
func (s *Service) checkSchema(c *echo.Context, schema []byte) error {
	_, err := call(s, c, s.admission.CheckSchema, &admissionv1.CheckSchemaRequest{Schema: schema})
	return err
}

func (s *Service) createType(c *echo.Context) error {
	dry, err := dryRun(c)
	if err != nil {
		return err
	}
	var body createTypeBody
	if err := decodeJSONBody(c, &body); err != nil {
		return err
	}
	var errs []problem.FieldError
	if body.Name == "" {
		errs = append(errs, problem.FieldError{Path: "/name", Message: "name is required"})
	} else if fe := names.TypeName("/name", body.Name); fe != nil {
		errs = append(errs, *fe)
	}
	if body.Version == "" {
		errs = append(errs, problem.FieldError{Path: "/version", Message: "version is required"})
	} else if fe := names.TypeVersion("/version", body.Version); fe != nil {
		errs = append(errs, *fe)
	}
	errs = append(errs, checkSchemaShape(body.Schema, true)...)
	policy, perrs := body.ReconcilePolicy.toProto()
	errs = append(errs, perrs...)
	if err := fieldsError("invalid resource type", errs); err != nil {
		return err
	}
	if err := s.checkSchema(c, body.Schema); err != nil {
		return err
	}
	resp, err := call(s, c, s.store.CreateResourceType, &storev1.CreateResourceTypeRequest{
		ResourceType: &storev1.ResourceType{Name: body.Name, Version: body.Version, Description: body.Description, Schema: body.Schema, ReconcilePolicy: policy},
		DryRun:       dry,
	})
	if err != nil {
		return err
	}
	t := resourcepb.TypeFromProto(resp.GetResourceType())
	if !dry && t != nil && t.ID != 0 {
		c.Response().Header().Set(echo.HeaderLocation, "/api/v1/resource-types/"+strconv.FormatInt(t.ID, 10))
	}
	return writeJSON(c, http.StatusCreated, t)
}

func (s *Service) listTypes(c *echo.Context) error {
	resp, err := call(s, c, s.store.ListResourceTypes, &storev1.ListResourceTypesRequest{Name: c.QueryParam("name")})
	if err != nil {
		return err
	}
	out := make([]*resource.Type, 0, len(resp.GetResourceTypes()))
	for _, t := range resp.GetResourceTypes() {
		out = append(out, resourcepb.TypeFromProto(t))
	}
	return writeJSON(c, http.StatusOK, out)
}

// typeID parses the id of a resource type path; a name in its place gets a
// hint at the name/version route.
// typeID reads the {id} of a resource type path: a positive integer, or
// for a read a negative one, the id of a built-in type (TenantRegistry -1,
// TenantTemplate -2, Tenant -3, HttpSource -4), which cannot be changed or
// deleted.
func typeID(c *echo.Context, builtinOK bool) (int64, error) {
	raw := c.Param("id")
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id == 0 {
		return 0, problem.New(problem.Invalid, problem.CodeInvalid,
			"%q is not a resource type id (an integer, negative for a built-in type); to address a type by name use /api/v1/resource-types/{name}/{version} or ?name=", raw).
			WithFields(problem.FieldError{Path: "/id", Message: "must be a non-zero integer"})
	}
	if id < 0 && !builtinOK {
		return 0, problem.New(problem.Invalid, problem.CodeInvalid, "resource type %d is built in: it can be read, not changed or deleted", id).
			WithFields(problem.FieldError{Path: "/id", Message: "a built-in type cannot be changed or deleted"})
	}
	return id, nil
}

func (s *Service) getTypeByID(c *echo.Context, id int64) (*resource.Type, error) {
	resp, err := call(s, c, s.store.GetResourceType, &storev1.GetResourceTypeRequest{Id: id})
	if err != nil {
		return nil, err
	}
	return resourcepb.TypeFromProto(resp.GetResourceType()), nil
}

func (s *Service) getType(c *echo.Context) error {
	id, err := typeID(c, true)
	if err != nil {
		return err
	}
	t, err := s.getTypeByID(c, id)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, t)
}

func (s *Service) getTypeByName(c *echo.Context) error {
	name, version := c.Param("id"), c.Param("version")
	resp, err := call(s, c, s.store.GetResourceType, &storev1.GetResourceTypeRequest{Name: name, Version: version})
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, resourcepb.TypeFromProto(resp.GetResourceType()))
}

func (s *Service) updateType(c *echo.Context) error {
	id, err := typeID(c, false)
	if err != nil {
		return err
	}
	dry, err := dryRun(c)
	if err != nil {
		return err
	}
	var body updateTypeBody
	if err := decodeJSONBody(c, &body); err != nil {
		return err
	}
	errs := checkSchemaShape(body.Schema, false)
	policy, perrs := body.ReconcilePolicy.toProto()
	errs = append(errs, perrs...)
	if err := fieldsError("invalid resource type", errs); err != nil {
		return err
	}
	cur, err := s.getTypeByID(c, id)
	if err != nil {
		return err
	}
	if body.Name != nil && *body.Name != cur.Name {
		errs = append(errs, problem.FieldError{Path: "/name", Message: fmt.Sprintf("name is immutable: it is %q", cur.Name)})
	}
	if body.Version != nil && *body.Version != cur.Version {
		errs = append(errs, problem.FieldError{Path: "/version", Message: fmt.Sprintf("version is immutable: it is %q; register a new version with POST instead", cur.Version)})
	}
	if err := fieldsError("name and version of a resource type cannot change", errs); err != nil {
		return err
	}
	req := &storev1.UpdateResourceTypeRequest{Id: id, Description: body.Description, DryRun: dry, ReconcilePolicy: policy}
	if !isNull(body.Schema) {
		if err := s.checkSchema(c, body.Schema); err != nil {
			return err
		}
		req.Schema = body.Schema
	}
	resp, err := call(s, c, s.store.UpdateResourceType, req)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, resourcepb.TypeFromProto(resp.GetResourceType()))
}

func (s *Service) deleteType(c *echo.Context) error {
	id, err := typeID(c, false)
	if err != nil {
		return err
	}
	dry, err := dryRun(c)
	if err != nil {
		return err
	}
	if _, err := call(s, c, s.store.DeleteResourceType, &storev1.DeleteResourceTypeRequest{Id: id, DryRun: dry}); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

package gateway

import (
	"math"
	"net/http"

	"github.com/labstack/echo/v5"

	"github.com/no8s/no8s/libs/api/names"
	"github.com/no8s/no8s/libs/client"
	storev1 "github.com/no8s/no8s/proto/gen/no8s/store/v1"
	"github.com/no8s/no8s/services/internal/problem"
)

// Event record page sizes (the store's).
const (
	defaultEventsLimit = 50
	maxEventsLimit     = 500
)

// eventRecordDoc is one Event (the Kubernetes kind) in the API: a record
// attached to a resource, apart from the change stream that the SSE paths
// (/events, /resources/{id}/events) serve. It is the API's (libs/client).
type eventRecordDoc = client.EventRecord

// eventRecordBody is the body of POST /api/v1/resources/{id}/event-records.
type eventRecordBody = client.EventRecordCreate

func eventRecordOf(e *storev1.EventRecord) eventRecordDoc {
	return eventRecordDoc{
		ID: e.GetId(), ResourceID: e.GetResourceId(), ResourceUID: e.GetResourceUid(), ResourceName: e.GetResourceName(),
		ResourceTypeName: e.GetResourceTypeName(), ResourceTypeVersion: e.GetResourceTypeVersion(),
		Type: e.GetType(), Reason: e.GetReason(), Message: e.GetMessage(), Source: e.GetSource(), Count: e.GetCount(),
		FirstTime: e.GetFirstTime().AsTime().UTC(), LastTime: e.GetLastTime().AsTime().UTC(),
	}
}

// listEventRecords is GET /api/v1/event-records?resource_id=&type=&reason=&limit=&before=:
// Events, newest first.
func (s *Service) listEventRecords(c *echo.Context) error {
	id, _, err := queryInt(c, "resource_id", 1, math.MaxInt64)
	if err != nil {
		return err
	}
	return s.writeEventRecords(c, id, false)
}

// listResourceEventRecords is GET /api/v1/resources/{id}/event-records: the
// Events of one resource, newest first; 404 when the resource does not
// exist and has no Events left (the Events of a purged resource are kept
// until retention drops them).
func (s *Service) listResourceEventRecords(c *echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	return s.writeEventRecords(c, id, true)
}

func (s *Service) writeEventRecords(c *echo.Context, id int64, mustExist bool) error {
	limit, given, err := queryInt(c, "limit", 1, maxEventsLimit)
	if err != nil {
		return err
	}
	if !given {
		limit = defaultEventsLimit
	}
	before, _, err := queryInt(c, "before", 1, math.MaxInt64)
	if err != nil {
		return err
	}
	typ := c.QueryParam("type")
	if typ != "" {
		if fe := names.EventType("/type", typ); fe != nil {
			return fieldsError("invalid query", []problem.FieldError{*fe})
		}
	}
	resp, err := call(s, c, s.store.ListEvents, &storev1.ListEventsRequest{
		ResourceId: id, Type: typ, Reason: c.QueryParam("reason"), Limit: int32(limit), BeforeId: before,
	})
	if err != nil {
		return err
	}
	if mustExist && len(resp.GetEvents()) == 0 && before == 0 {
		if _, err := s.getResourceByID(c.Request().Context(), id); err != nil {
			return err
		}
	}
	out := make([]eventRecordDoc, 0, len(resp.GetEvents()))
	for _, e := range resp.GetEvents() {
		out = append(out, eventRecordOf(e))
	}
	return writeJSON(c, http.StatusOK, out)
}

// recordEvent is POST /api/v1/resources/{id}/event-records: a client (a
// controller of the control plane, such as registry-sync) records an
// Event on a resource; 201 with the record (a repeat within the dedup
// window answers the existing record, its count raised).
func (s *Service) recordEvent(c *echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	var body eventRecordBody
	if err := decodeJSONBody(c, &body); err != nil {
		return err
	}
	var errs []problem.FieldError
	for _, fe := range []*names.FieldError{names.EventType("/type", body.Type), names.EventReason("/reason", body.Reason),
		names.EventMessage("/message", body.Message), names.EventSource("/source", body.Source)} {
		if fe != nil {
			errs = append(errs, *fe)
		}
	}
	if err := fieldsError("invalid event", errs); err != nil {
		return err
	}
	resp, err := call(s, c, s.store.RecordEvent, &storev1.RecordEventRequest{ResourceId: id, Event: &storev1.EventInput{
		Type: body.Type, Reason: body.Reason, Message: body.Message, Source: body.Source,
	}})
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusCreated, eventRecordOf(resp.GetEvent()))
}

package audit

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"strings"

	"github.com/no8s/no8s/services/internal/authn"
)

// HTTPRecord starts the record of an HTTP request served on route (its
// template, "" for none): the source address, method, route, dry-run, and
// the id of the API token it presents, if any. It reads nothing else of
// the request: not its URL, its body, nor any header but the
// Authorization header's token id.
func HTTPRecord(r *http.Request, route string) Record {
	rec := Record{Source: SourceHTTP, Method: r.Method, Route: route}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		rec.SourceAddress = host
	}
	rec.DryRun = r.URL.Query().Get("dry_run") == "true"
	if h := r.Header.Get("Authorization"); h != "" {
		if tok, ok := authn.BearerToken(h); ok {
			if id, _, err := authn.ParseToken(tok); err == nil {
				rec.User.TokenID = id
			}
		}
	}
	return rec
}

// IdentityOf is p without its credential; presented (the id of the API
// token the request sent) when p is nil: nobody was identified.
func IdentityOf(p *authn.Principal, presented Identity) Identity {
	if p == nil {
		return presented
	}
	out := Identity{Username: p.Username, AuthMethod: p.Method, TokenID: p.TokenID}
	if len(p.Groups) > 0 {
		out.Groups = append([]string(nil), p.Groups...)
	}
	return out
}

// VerbOf is the verb of a request by its method and route template, when
// no layer said it (Entry.SetVerb): apply, reconcile, record-event and
// update-finalizers for those routes; revoke for deleting a token; create,
// update, patch and delete for the other writes; watch, get and list for
// reads.
func VerbOf(method, route string) string {
	switch {
	case method == http.MethodPost && strings.HasSuffix(route, "/apply"):
		return "apply"
	case method == http.MethodPost && strings.HasSuffix(route, "/reconcile"):
		return "reconcile"
	case method == http.MethodPost && strings.HasSuffix(route, "/event-records") && strings.Contains(route, ":id"):
		return "record-event"
	case method == http.MethodPut && strings.HasSuffix(route, "/finalizers"):
		return "update-finalizers"
	case method == http.MethodDelete && strings.HasPrefix(route, "/api/v1/tokens/"):
		return "revoke"
	}
	switch method {
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	case http.MethodGet, http.MethodHead:
		last := route[strings.LastIndex(route, "/")+1:]
		switch {
		case last == "events":
			return "watch"
		case strings.HasPrefix(last, ":"):
			return "get"
		}
		return "list"
	}
	return strings.ToLower(method)
}

// kindOf is the kind of the objects of one of the API's collections
// ("" for another path).
func kindOf(collection string) string {
	switch collection {
	case "resources":
		return "Resource"
	case "resource-types":
		return "ResourceType"
	case "namespaces":
		return "Namespace"
	case "admission-webhooks":
		return "AdmissionWebhook"
	case "tokens":
		return "Token"
	case "event-records":
		return "EventRecord"
	}
	return ""
}

// RouteObject is what a route template and its parameters (param) say of
// the object: its kind from the collection (/api/v1/<collection>/...), its
// id, name, type and version from the parameters :id, :name, :type and
// :version.
func RouteObject(route string, param func(string) string) Object {
	rest, ok := strings.CutPrefix(route, "/api/v1/")
	if !ok {
		return Object{}
	}
	collection, _, _ := strings.Cut(rest, "/")
	o := Object{Kind: kindOf(collection)}
	if o.Kind == "" {
		return Object{}
	}
	for _, seg := range strings.Split(rest, "/") {
		switch seg {
		case ":id":
			o.ID = param("id")
		case ":name":
			o.Name = param("name")
		case ":type":
			o.Type = param("type")
		case ":version":
			o.Version = param("version")
		}
	}
	return o
}

// answerFields are the fields of an answer's JSON document that name its
// object; nothing else of it is read.
type answerFields struct {
	ID                  json.RawMessage `json:"id"`
	Name                string          `json:"name"`
	Namespace           string          `json:"namespace"`
	Version             string          `json:"version"`
	ResourceTypeName    string          `json:"resource_type_name"`
	ResourceTypeVersion string          `json:"resource_type_version"`
}

// AnswerObject is what the JSON document answering a write says of its
// object of kind kind (RouteObject's): a resource's id, namespace, name,
// type and version; a resource type's id, name and version; another
// object's id and name. Only those fields are read; a body that is not
// such a document says nothing.
func AnswerObject(kind string, body []byte) Object {
	if kind == "" || kind == "EventRecord" || len(body) == 0 || body[0] != '{' {
		return Object{}
	}
	var f answerFields
	if json.Unmarshal(body, &f) != nil {
		return Object{}
	}
	o := Object{Name: f.Name, ID: string(bytes.Trim(f.ID, `"`))}
	if o.ID == "null" {
		o.ID = ""
	}
	switch kind {
	case "Resource":
		o.Namespace, o.Type, o.Version = f.Namespace, f.ResourceTypeName, f.ResourceTypeVersion
	case "ResourceType":
		o.Version = f.Version
	}
	return o
}

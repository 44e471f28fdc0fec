package httpapi

import (
	"net/http"

	"github.com/example/waitingroom/internal/metrics"
)

// Route is one method and path that the API serves, the path in the syntax
// of http.ServeMux and API Gateway alike ({programId} is a path parameter).
type Route struct {
	Method string
	Path   string
	// Admin routes are served by NewAdmin (and New) behind its auth; on AWS
	// they sit behind the AWS_IAM authorizer, in the admin function.
	Admin bool
	// Op is what the route's requests count as in the metrics.
	Op    metrics.Op
	serve func(*api, http.ResponseWriter, *http.Request)
}

// Route paths.
const (
	QueuePath     = "/api/v1/queues/programs/{programId}"
	AdminPath     = "/api/v1/admin/programs/{programId}"
	AdmissionPath = "/api/v1/admin/programs/{programId}/admissions"
	// JWKSPath is the JWKS of the admission passes' keys (RFC 8615
	// well-known location).
	JWKSPath = "/.well-known/jwks.json"
)

// Routes lists every route the API serves, each with its metrics operation
// and its endpoint function:
// adding a route is one line here and one function. template.yaml must send
// each to the right function with the right authorization (template_test.go
// checks), and any other method on one of these paths gets 405 with Allow.
var Routes = []Route{
	{http.MethodPost, QueuePath, false, metrics.OpEnter, (*api).enter},
	{http.MethodGet, QueuePath, false, metrics.OpPoll, (*api).poll},
	{http.MethodDelete, QueuePath, false, metrics.OpLeave, (*api).leave},
	{http.MethodGet, JWKSPath, false, metrics.OpOther, (*api).jwks},
	{http.MethodGet, AdminPath, true, metrics.OpAdmin, (*api).getProgram},
	{http.MethodPut, AdminPath, true, metrics.OpAdmin, (*api).putProgram},
	{http.MethodPost, AdmissionPath, true, metrics.OpAdmin, (*api).admit},
}

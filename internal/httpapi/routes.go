package httpapi

import "net/http"

// Route is one method and path that the Handler serves, the path in API
// Gateway's route syntax ({programId} is a path parameter).
type Route struct {
	Method string
	Path   string
	// Admin routes are served only with WithIAMAdmin or WithAdminSecret;
	// on AWS they sit behind the AWS_IAM authorizer, in the admin function.
	Admin bool
}

// Route paths.
const (
	QueuePath     = "/api/v1/queues/programs/{programId}"
	AdminPath     = "/api/v1/admin/programs/{programId}"
	AdmissionPath = "/api/v1/admin/programs/{programId}/admissions"
)

// Routes lists every route the Handler serves. template.yaml must send each
// to the right function with the right authorization (template_test.go
// checks), and any other method on one of these paths gets 405 with Allow.
var Routes = []Route{
	{http.MethodPost, QueuePath, false},
	{http.MethodGet, QueuePath, false},
	{http.MethodDelete, QueuePath, false},
	{http.MethodGet, AdminPath, true},
	{http.MethodPut, AdminPath, true},
	{http.MethodPost, AdmissionPath, true},
}

package httpapi

import (
	"net/http"

	wire "github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/metrics"
)

// Route is one method and path that the API serves, in the syntax of http.ServeMux and API Gateway alike.
type Route struct {
	Method string
	Path   string
	Admin  bool       // served by NewAdmin (and New) behind its auth
	Op     metrics.Op // what the route's requests count as in the metrics
	serve  func(*api, http.ResponseWriter, *http.Request) error
}

// Routes lists every route the API serves; template.yaml must route each to the right
// function and authorization. Other methods on these paths get 405 with Allow.
var Routes = []Route{
	{http.MethodPost, wire.QueuePath, false, metrics.OpEnter, (*api).enter},
	{http.MethodGet, wire.QueuePath, false, metrics.OpPoll, (*api).poll},
	{http.MethodDelete, wire.QueuePath, false, metrics.OpLeave, (*api).leave},
	{http.MethodDelete, wire.SessionPath, false, metrics.OpLeave, (*api).endSession},
	{http.MethodPut, wire.PushPath, false, metrics.OpOther, (*api).subscribe},
	{http.MethodDelete, wire.PushPath, false, metrics.OpOther, (*api).unsubscribe},
	{http.MethodPost, wire.HandoffPath, false, metrics.OpHandoff, (*api).handoff},
	{http.MethodPost, wire.RedeemPath, false, metrics.OpHandoff, (*api).redeem},
	{http.MethodGet, wire.ChallengePath, false, metrics.OpOther, (*api).challenge},
	{http.MethodGet, wire.JWKSPath, false, metrics.OpOther, (*api).jwks},
	{http.MethodGet, wire.ProgramsPath, true, metrics.OpAdmin, (*api).listPrograms},
	{http.MethodGet, wire.AdminPath, true, metrics.OpAdmin, (*api).getProgram},
	{http.MethodDelete, wire.AdminPath, true, metrics.OpAdmin, (*api).deleteProgram},
	{http.MethodGet, wire.ChangesPath, true, metrics.OpAdmin, (*api).history},
	{http.MethodGet, wire.ReportPath, true, metrics.OpAdmin, (*api).report},
	{http.MethodPut, wire.AdminPath, true, metrics.OpAdmin, (*api).putProgram},
	{http.MethodPost, wire.AdmissionPath, true, metrics.OpAdmin, (*api).admit},
	{http.MethodDelete, wire.AdminSessionPath, true, metrics.OpAdmin, (*api).releaseSession},
	{http.MethodGet, wire.TokenPath, true, metrics.OpAdmin, (*api).getToken},
	{http.MethodGet, wire.AccountPath, true, metrics.OpAdmin, (*api).accountToken},
	{http.MethodDelete, wire.TokenPath, true, metrics.OpAdmin, (*api).revokeToken},
	{http.MethodPost, wire.PassesPath, true, metrics.OpAdmin, (*api).issueBypass},
	{http.MethodGet, wire.KeysPath, true, metrics.OpAdmin, withKeyring((*api).listKeys)},
	{http.MethodPost, wire.KeysPath, true, metrics.OpAdmin, withKeyring((*api).rotateKey)},
	{http.MethodDelete, wire.KeyPath, true, metrics.OpAdmin, withKeyring((*api).revokeKey)},
	{http.MethodGet, wire.EdgeKeysPath, true, metrics.OpAdmin, (*api).edgeKeys},
	{http.MethodPost, wire.EdgeKeysPath, true, metrics.OpAdmin, (*api).rotateEdgeKeys},
}

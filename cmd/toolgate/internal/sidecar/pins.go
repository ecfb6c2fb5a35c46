package sidecar

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/toolgate/toolgate/proxy/mcppin"
)

// maxAcceptBytes bounds the body of POST /mcp/pins/accept.
const maxAcceptBytes = 16 << 10

// pinAccept is the body of POST /mcp/pins/accept: the tool whose change
// the operator reviewed (route, server key and tool, as GET
// /mcp/pins/changes lists them) and the listed digest they reviewed
// ("" for a removed tool: its pin is dropped).
type pinAccept struct {
	Route  string `json:"route"`
	Server string `json:"server"`
	Tool   string `json:"tool"`
	Digest string `json:"digest"`
}

// servePinChanges answers GET /mcp/pins/changes: the MCP tools whose
// definitions wait for an operator's decision.
func (sc *Sidecar) servePinChanges(w http.ResponseWriter, _ *http.Request) {
	changes := sc.proxy.PinChanges()
	if changes == nil {
		changes = []mcppin.Verdict{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"changes": changes})
}

// servePinAccept answers POST /mcp/pins/accept: the change is accepted
// when the digest is the one the server lists now (200, the tool's status
// after), refused when the server changed the tool again since (409) or
// there is nothing to accept (404).
func (sc *Sidecar) servePinAccept(w http.ResponseWriter, r *http.Request) {
	var req pinAccept
	dec := json.NewDecoder(io.LimitReader(r.Body, maxAcceptBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || dec.More() || req.Route == "" || req.Server == "" || req.Tool == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": `expected {"route": ..., "server": ..., "tool": ..., "digest": ...} as GET /mcp/pins/changes lists them`})
		return
	}
	v, err := sc.proxy.AcceptPin(req.Route, req.Server, req.Tool, req.Digest)
	switch {
	case errors.Is(err, mcppin.ErrStaleAccept):
		writeJSON(w, http.StatusConflict, map[string]string{"error": "the server changed the tool again since that digest; review GET /mcp/pins/changes again"})
	case errors.Is(err, mcppin.ErrNoPin), errors.Is(err, mcppin.ErrNoChange):
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "nothing to accept: " + err.Error()})
	case err != nil:
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
	default:
		sc.log.Info("admin: an MCP tool definition was accepted", "route", req.Route, "server", req.Server, "tool", req.Tool, "remote", r.RemoteAddr)
		writeJSON(w, http.StatusOK, v)
	}
}

// writeJSON answers v as JSON with the status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

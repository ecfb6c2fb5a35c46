package sink

import (
	"strconv"

	"github.com/toolgate/toolgate/internal/jsonenc"
)

// The event encoding, written out by hand: encoding/json spent about
// 1.5 µs of a call's CPU on reflection to encode its event on the way to
// the spool (docs/performance.md, "The event path"), and this writes the
// same bytes in a fraction of that. TestAppendEventMatchesJSON and
// FuzzAppendEvent hold it to encoding/json's output for every field of
// Event, so a field added to Event without a line here fails them.

// appendEvent appends ev to b as one JSON object and a line break: the
// bytes encoding/json writes with SetEscapeHTML(false), keys in Event's
// order. With omitZero, fields holding their zero value (an empty string,
// 0, false, a nil slice) are left out, which json.Unmarshal reads back
// into the same Event; event_id and time are always written. A time
// outside what RFC 3339 can write (a year beyond 9999, say) is an error,
// as it is for encoding/json, and b is then returned as it was given.
func appendEvent(b []byte, ev *Event, omitZero bool) ([]byte, error) {
	n0 := len(b)
	w := eventWriter{b: append(b, '{'), omitZero: omitZero}
	w.b = append(w.b, `"event_id":`...)
	w.b = jsonenc.AppendString(w.b, ev.EventID)
	w.b = append(w.b, `,"time":"`...)
	var err error
	if w.b, err = ev.Time.AppendText(w.b); err != nil {
		return b[:n0], err
	}
	w.b = append(w.b, '"')
	w.str(`,"sidecar":`, ev.Sidecar)
	w.str(`,"listener":`, ev.Listener)
	w.str(`,"tool":`, ev.Tool)
	w.str(`,"agent":`, ev.Agent)
	w.str(`,"session":`, ev.Session)
	w.str(`,"trace_id":`, ev.TraceID)
	w.str(`,"method":`, ev.Method)
	w.str(`,"host":`, ev.Host)
	w.str(`,"path_template":`, ev.PathTemplate)
	w.int(`,"upstream_status":`, int64(ev.UpstreamStatus))
	w.bool(`,"ok":`, ev.OK)
	w.str(`,"error_code":`, ev.ErrorCode)
	w.str(`,"error_class":`, ev.ErrorClass)
	w.str(`,"reason":`, ev.Reason)
	w.str(`,"detail":`, ev.Detail)
	w.strs(`,"violation_paths":`, ev.ViolationPaths)
	w.bool(`,"envelope":`, ev.Envelope)
	w.bool(`,"refused":`, ev.Refused)
	w.int(`,"retry_after_ms":`, ev.RetryAfterMS)
	w.int(`,"total_us":`, ev.TotalUS)
	w.int(`,"upstream_us":`, ev.UpstreamUS)
	w.int(`,"request_bytes":`, ev.RequestBytes)
	w.int(`,"response_bytes":`, ev.ResponseBytes)
	w.str(`,"config_version":`, ev.ConfigVersion)
	w.str(`,"policy_version":`, ev.PolicyVersion)
	w.bool(`,"dry_run_denied":`, ev.DryRunDenied)
	w.strs(`,"dry_run_violations":`, ev.DryRunViolations)
	w.str(`,"policy_error":`, ev.PolicyError)
	w.str(`,"mcp_server":`, ev.MCPServer)
	w.str(`,"rpc_method":`, ev.RPCMethod)
	w.str(`,"rpc_id":`, ev.RPCID)
	w.bool(`,"inspected":`, ev.Inspected)
	w.str(`,"outcome":`, ev.Outcome)
	w.str(`,"mcp_protocol":`, ev.MCPProtocol)
	w.str(`,"approval":`, ev.Approval)
	w.str(`,"budget":`, ev.Budget)
	w.str(`,"limit_scope":`, ev.LimitScope)
	w.str(`,"answer":`, ev.Answer)
	w.strs(`,"answer_findings":`, ev.AnswerFindings)
	w.int(`,"redactions":`, ev.Redactions)
	w.strs(`,"definition_changes":`, ev.DefinitionChanges)
	if ev.ArgShape != "" { // omitempty: absent unless the tool observes
		w.str(`,"arg_shape":`, ev.ArgShape)
	}
	return append(w.b, '}', '\n'), nil
}

// eventWriter appends an event's fields after its first two.
type eventWriter struct {
	b        []byte
	omitZero bool
}

// The methods take the key with its leading comma and colon.

func (w *eventWriter) str(key, v string) {
	if v == "" && w.omitZero {
		return
	}
	w.b = jsonenc.AppendString(append(w.b, key...), v)
}

func (w *eventWriter) int(key string, v int64) {
	if v == 0 && w.omitZero {
		return
	}
	w.b = strconv.AppendInt(append(w.b, key...), v, 10)
}

func (w *eventWriter) bool(key string, v bool) {
	if !v && w.omitZero {
		return
	}
	w.b = strconv.AppendBool(append(w.b, key...), v)
}

func (w *eventWriter) strs(key string, v []string) {
	if v == nil {
		if !w.omitZero {
			w.b = append(append(w.b, key...), "null"...)
		}
		return
	}
	w.b = append(append(w.b, key...), '[')
	for i, s := range v {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.b = jsonenc.AppendString(w.b, s)
	}
	w.b = append(w.b, ']')
}

package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/hearth-llm/hearth/router"
)

// ErrInvalidNvext is wrapped by every error of ParseNvext; the gateway
// answers it with 400 and the error text, which names the bad field.
var ErrInvalidNvext = errors.New("invalid nvext")

// NvextError names the nvext field that is invalid and says why; it wraps
// ErrInvalidNvext. The gateway reports Field as the bad parameter.
type NvextError struct {
	Field  string // e.g. "nvext.agent_hints.osl"
	Reason string // e.g. "must be an integer"
}

func (e *NvextError) Error() string { return "invalid nvext: " + e.Field + ": " + e.Reason }

func (e *NvextError) Unwrap() error { return ErrInvalidNvext }

func invalidNvext(field, format string, args ...any) error {
	return &NvextError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// Limits of the agent hints. They are wide on purpose: the values only order
// requests, but absurd ones are a client bug worth reporting.
const (
	MaxPriority       = 1_000_000
	MaxOSL            = 1 << 20 // expected output tokens
	MaxSessionIDLen   = 256
	MaxSessionTimeout = 24 * time.Hour
)

// Nvext is the parsed nvext object of a request body.
type Nvext struct {
	AgentHints router.Hints
	// HintsSent marks the agent hints the client sent (HintClient); the
	// others are HintNone.
	HintsSent HintOrigins
	// SessionID is nvext.session_control.session_id; "" when absent (the
	// gateway may know the session from a header or the body instead).
	SessionID string
	// SessionControl is the rest of nvext.session_control; zero when
	// absent.
	SessionControl router.SessionControl
}

// ParseNvext parses and validates the nvext object of a request body. Empty
// input and JSON null give the zero Nvext. Unknown fields are ignored, as
// Dynamo does; fields of the wrong type or out of range are errors naming
// the field, wrapping ErrInvalidNvext.
func ParseNvext(raw json.RawMessage) (Nvext, error) {
	var nv Nvext
	top, err := nvextObject(raw, "nvext")
	if err != nil || top == nil {
		return nv, err
	}
	if hintsRaw, ok := top["agent_hints"]; ok {
		h, err := nvextObject(hintsRaw, "nvext.agent_hints")
		if err != nil {
			return Nvext{}, err
		}
		for key, o := range map[string]*HintOrigin{
			"priority": &nv.HintsSent.Priority, "strict_priority": &nv.HintsSent.StrictPriority,
			"osl": &nv.HintsSent.OSL, "speculative_prefill": &nv.HintsSent.SpeculativePrefill,
		} {
			if raw, ok := h[key]; ok && !isJSONNull(raw) {
				*o = HintClient
			}
		}
		if nv.AgentHints.Priority, err = nvextInt(h, "nvext.agent_hints", "priority", -MaxPriority, MaxPriority); err != nil {
			return Nvext{}, err
		}
		if nv.AgentHints.StrictPriority, err = nvextInt(h, "nvext.agent_hints", "strict_priority", -MaxPriority, MaxPriority); err != nil {
			return Nvext{}, err
		}
		if nv.AgentHints.OSL, err = nvextInt(h, "nvext.agent_hints", "osl", 0, MaxOSL); err != nil {
			return Nvext{}, err
		}
		if nv.AgentHints.SpeculativePrefill, err = nvextBool(h, "nvext.agent_hints", "speculative_prefill"); err != nil {
			return Nvext{}, err
		}
	}
	if scRaw, ok := top["session_control"]; ok {
		sc, err := nvextObject(scRaw, "nvext.session_control")
		if err != nil {
			return Nvext{}, err
		}
		if sc != nil {
			if nv.SessionID, nv.SessionControl, err = parseSessionControl(sc); err != nil {
				return Nvext{}, err
			}
		}
	}
	return nv, nil
}

func parseSessionControl(sc map[string]json.RawMessage) (id string, ctl router.SessionControl, err error) {
	const obj = "nvext.session_control"
	if ctl.Action, err = nvextString(sc, obj, "action"); err != nil {
		return "", ctl, err
	}
	switch ctl.Action {
	case "", router.SessionOpen, router.SessionClose:
	default:
		return "", ctl, invalidNvext(obj+".action", "must be %q or %q", router.SessionOpen, router.SessionClose)
	}
	// An empty id is allowed: the gateway may know the session from a
	// header instead.
	if id, err = nvextString(sc, obj, "session_id"); err != nil {
		return "", ctl, err
	}
	if len(id) > MaxSessionIDLen {
		return "", ctl, invalidNvext(obj+".session_id", "must be at most %d bytes", MaxSessionIDLen)
	}
	secs, err := nvextInt(sc, obj, "timeout", 0, int(MaxSessionTimeout/time.Second))
	if err != nil {
		return "", ctl, err
	}
	ctl.Timeout = time.Duration(secs) * time.Second
	return id, ctl, nil
}

// nvextObject decodes raw as a JSON object; nil map for empty or null.
func nvextObject(raw json.RawMessage, name string) (map[string]json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	if raw[0] != '{' {
		return nil, invalidNvext(name, "must be an object")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, invalidNvext(name, "%v", err)
	}
	return m, nil
}

func isJSONNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || bytes.Equal(raw, []byte("null"))
}

// nvextInt reads an integer field in [lo, hi]; absent or null gives 0.
// Integral numbers written as floats (3.0) are accepted, as JSON does not
// tell them apart.
func nvextInt(m map[string]json.RawMessage, obj, key string, lo, hi int) (int, error) {
	raw, ok := m[key]
	if !ok || isJSONNull(raw) {
		return 0, nil
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil {
		return 0, invalidNvext(obj+"."+key, "must be an integer")
	}
	if f != math.Trunc(f) {
		return 0, invalidNvext(obj+"."+key, "must be an integer")
	}
	if f < float64(lo) || f > float64(hi) {
		return 0, invalidNvext(obj+"."+key, "must be between %d and %d", lo, hi)
	}
	return int(f), nil
}

func nvextBool(m map[string]json.RawMessage, obj, key string) (bool, error) {
	raw, ok := m[key]
	if !ok || isJSONNull(raw) {
		return false, nil
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err != nil {
		return false, invalidNvext(obj+"."+key, "must be a boolean")
	}
	return b, nil
}

func nvextString(m map[string]json.RawMessage, obj, key string) (string, error) {
	raw, ok := m[key]
	if !ok || isJSONNull(raw) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", invalidNvext(obj+"."+key, "must be a string")
	}
	return s, nil
}

package api

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/router"
)

func TestParseNvext(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Nvext
		wantErr string // substring naming the field; "" for success
	}{
		{"empty", ``, Nvext{}, ""},
		{"null", `null`, Nvext{}, ""},
		{"empty object", `{}`, Nvext{}, ""},
		{"all hints", `{"agent_hints":{"priority":5,"strict_priority":1,"osl":256,"speculative_prefill":true}}`,
			Nvext{AgentHints: router.Hints{Priority: 5, StrictPriority: 1, OSL: 256, SpeculativePrefill: true},
				HintsSent: HintOrigins{Priority: HintClient, StrictPriority: HintClient, OSL: HintClient, SpeculativePrefill: HintClient}}, ""},
		{"priority zero is sent", `{"agent_hints":{"priority":0}}`, Nvext{HintsSent: HintOrigins{Priority: HintClient}}, ""},
		{"negative priority", `{"agent_hints":{"priority":-3}}`, Nvext{AgentHints: router.Hints{Priority: -3}, HintsSent: HintOrigins{Priority: HintClient}}, ""},
		{"integral float", `{"agent_hints":{"osl":100.0}}`, Nvext{AgentHints: router.Hints{OSL: 100}, HintsSent: HintOrigins{OSL: HintClient}}, ""},
		{"null fields", `{"agent_hints":{"priority":null,"osl":null},"session_control":null}`, Nvext{}, ""},
		{"unknown fields ignored", `{"greed":1,"agent_hints":{"priority":2,"mood":"calm"},"annotations":["x"]}`,
			Nvext{AgentHints: router.Hints{Priority: 2}, HintsSent: HintOrigins{Priority: HintClient}}, ""},
		{"session", `{"session_control":{"session_id":"abc","action":"open","timeout":600}}`,
			Nvext{SessionID: "abc", SessionControl: router.SessionControl{Action: router.SessionOpen, Timeout: 600 * time.Second}}, ""},
		{"session close", `{"session_control":{"session_id":"abc","action":"close"}}`,
			Nvext{SessionID: "abc", SessionControl: router.SessionControl{Action: router.SessionClose}}, ""},
		{"not an object", `[1]`, Nvext{}, "nvext: must be an object"},
		{"hints not an object", `{"agent_hints":3}`, Nvext{}, "nvext.agent_hints: must be an object"},
		{"priority string", `{"agent_hints":{"priority":"high"}}`, Nvext{}, "nvext.agent_hints.priority: must be an integer"},
		{"priority fraction", `{"agent_hints":{"priority":1.5}}`, Nvext{}, "nvext.agent_hints.priority: must be an integer"},
		{"priority too big", `{"agent_hints":{"priority":1e12}}`, Nvext{}, "nvext.agent_hints.priority: must be between"},
		{"strict priority bool", `{"agent_hints":{"strict_priority":true}}`, Nvext{}, "nvext.agent_hints.strict_priority"},
		{"negative osl", `{"agent_hints":{"osl":-1}}`, Nvext{}, "nvext.agent_hints.osl: must be between 0"},
		{"speculative string", `{"agent_hints":{"speculative_prefill":"yes"}}`, Nvext{}, "nvext.agent_hints.speculative_prefill: must be a boolean"},
		{"session id from elsewhere", `{"session_control":{"action":"open"}}`,
			Nvext{SessionControl: router.SessionControl{Action: router.SessionOpen}}, ""},
		{"session id too long", `{"session_control":{"session_id":"` + strings.Repeat("s", MaxSessionIDLen+1) + `"}}`, Nvext{}, "nvext.session_control.session_id: must be at most"},
		{"session id number", `{"session_control":{"session_id":7}}`, Nvext{}, "nvext.session_control.session_id: must be a string"},
		{"bad action", `{"session_control":{"session_id":"a","action":"pause"}}`, Nvext{}, "nvext.session_control.action"},
		{"negative timeout", `{"session_control":{"session_id":"a","timeout":-5}}`, Nvext{}, "nvext.session_control.timeout"},
		{"broken json", `{"agent_hints":`, Nvext{}, "nvext"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseNvext([]byte(tt.in))
			if tt.wantErr != "" {
				var ne *NvextError
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrInvalidNvext) ||
					!errors.As(err, &ne) || !strings.HasPrefix(tt.wantErr, ne.Field) {
					t.Fatalf("err = %v, want ErrInvalidNvext mentioning %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func FuzzParseNvext(f *testing.F) {
	for _, s := range []string{
		``, `null`, `{}`, `{"agent_hints":{"priority":5,"strict_priority":1,"osl":256,"speculative_prefill":true}}`,
		`{"session_control":{"session_id":"abc","action":"open","timeout":600}}`, `{"agent_hints":{"osl":1e400}}`,
		`{"agent_hints":{"priority":-0.0}}`, `[` + `{}` + `]`, `{"session_control":{}}`,
		`{"agent_hints":{"priority":1,"strict_priority":2,"osl":3,"speculative_prefill":true},"session_control":{"session_id":"s","action":"open","timeout":1.5}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		nv, err := ParseNvext(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidNvext) {
				t.Fatalf("error does not wrap ErrInvalidNvext: %v", err)
			}
			return
		}
		h := nv.AgentHints
		if h.OSL < 0 || h.OSL > MaxOSL || h.Priority < -MaxPriority || h.Priority > MaxPriority ||
			h.StrictPriority < -MaxPriority || h.StrictPriority > MaxPriority {
			t.Fatalf("accepted out-of-range hints %+v from %q", h, data)
		}
		sc := nv.SessionControl
		if len(nv.SessionID) > MaxSessionIDLen || sc.Timeout < 0 || sc.Timeout > MaxSessionTimeout ||
			sc.Action != "" && sc.Action != router.SessionOpen && sc.Action != router.SessionClose {
			t.Fatalf("accepted bad session control %q %+v from %q", nv.SessionID, sc, data)
		}
	})
}

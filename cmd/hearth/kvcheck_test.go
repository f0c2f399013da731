//go:build linux

package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/daemon"
	"github.com/hearth-llm/hearth/daemon/daemontest"
	hruntime "github.com/hearth-llm/hearth/runtime"
)

// TestKVEventSelfCheckThroughProcesses: hearth up with its engines as
// child processes (hearth sim-engine) of each kind, their KV events
// published as the pinned release does or playing a fault
// (HEARTH_SIM_KV_EVENTS in the engine's environment). The start-up
// self-check passes the good engines; an engine whose events Hearth
// cannot match is caught before it serves, is routed on predicted caches
// (a repeated prompt is predicted cached although its events never say
// so), and the finding shows in the log, hearth engines, the console's
// engine card and the Health page (hearth doctor's checks).
func TestKVEventSelfCheckThroughProcesses(t *testing.T) {
	exe := hearthBinary(t)
	t.Parallel()
	cases := []struct {
		engine, fault string
		matched       int
		cause         string
	}{
		{"vllm", "", hruntime.KVProbeBlocks, ""},
		{"sglang", "", hruntime.KVProbeBlocks, ""},
		// vLLM's events store a request's new blocks together, so the
		// chain breaks where the second probe request's begin; SGLang's
		// one page each, so at the second page.
		{"vllm", hruntime.SimKVEventsWrongHashSeed, hruntime.KVProbeSplit, "hash chain Hearth cannot follow"},
		{"sglang", hruntime.SimKVEventsWrongHashSeed, 1, "hash chain Hearth cannot follow"},
		{"vllm", hruntime.SimKVEventsUnknownLayout, 0, "field order Hearth does not know"},
		{"sglang", hruntime.SimKVEventsUnknownLayout, 0, "field order Hearth does not know"},
		{"vllm", hruntime.SimKVEventsNone, 0, "no KV events arrived"},
	}
	for _, tc := range cases {
		name := tc.engine + "/" + tc.fault
		if tc.fault == "" {
			name = tc.engine + "/good"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var logs syncBuffer
			baseURL := serveTestUpLogged(t, &logs, []string{"--sim", "1x4090", "--engine-runtime", "process",
				"--speedup", "50", "--data-dir", t.TempDir()}, daemon.WithHearthBinary(exe), daemon.WithKVCheckWait(faultyKVCheckWait),
				daemon.WithSpecHook(func(s *hruntime.Spec) {
					asHearthEngine(s)
					s.Engine = hruntime.Kind(tc.engine) // the simulator plays it (--flavor)
					if tc.fault != "" {
						s.Env = append(s.Env, hruntime.EnvSimKVEvents+"="+tc.fault)
					}
				}))

			engines := listEngines(t, baseURL)
			if len(engines) != 1 || engines[0].State != "ready" || engines[0].Runtime != "process" {
				t.Fatalf("engines %+v, want one ready child process", engines)
			}
			e := engines[0]
			c := e.KVEvents
			cell := strconv.Itoa(tc.matched) + "/" + strconv.Itoa(hruntime.KVProbeBlocks)
			if tc.fault == "" {
				if c == nil || c.State != "match" || c.Matched != hruntime.KVProbeBlocks || c.Text() != cell {
					t.Fatalf("engine %s KV-event check %+v, want all %d probe blocks matched", e.Name, c, hruntime.KVProbeBlocks)
				}
				return
			}
			summary := "KV events: " + strconv.Itoa(tc.matched) + " of " + strconv.Itoa(hruntime.KVProbeBlocks) +
				" probe blocks matched; first difference at block " + strconv.Itoa(tc.matched) + ": "
			if c == nil || c.State != "differs" || c.Matched != tc.matched || c.FirstDifference == nil || *c.FirstDifference != tc.matched ||
				!strings.HasPrefix(c.Summary, summary) || !strings.Contains(c.Cause, tc.cause) {
				t.Fatalf("engine %s KV-event check %+v, want %d matched, first difference at %d, cause saying %q", e.Name, c, tc.matched, tc.matched, tc.cause)
			}

			// The log.
			if l := logs.String(); !strings.Contains(l, "routing it on predicted caches") || !strings.Contains(l, tc.cause) {
				t.Errorf("the daemon's log does not tell of the check:\n%s", l)
			}
			// hearth engines: the cell and the sentence under the table.
			out, _, err := runHearth(t, "", "engines", "--addr", baseURL)
			if err != nil || !strings.Contains(out, " "+cell+" ") || !strings.Contains(out, e.Name+": "+summary) {
				t.Errorf("hearth engines: %v\n%s", err, out)
			}
			// The Health page (hearth doctor's checks), the console's engine
			// card, and routing on predicted caches.
			daemontest.KVFindingShown(t, baseURL, e.Name, "qwen3-14b-fp8", summary)
		})
	}
}

// faultyKVCheckWait bounds the check's waits for the probe's events in
// this test. A good engine's events end the wait as soon as they have all
// arrived (in milliseconds); an engine playing a fault holds its start for
// the whole wait, twice when no event arrives, and the default of 10 s
// made each of those cases sleep 10 to 20 s. The events that do arrive
// come within the first second even on a loaded machine.
const faultyKVCheckWait = 4 * time.Second

// serveTestUpLogged is serveTestUp with the daemon's log also written to
// logs.
func serveTestUpLogged(t *testing.T, logs io.Writer, args []string, opts ...daemon.Option) (baseURL string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	env := &environment{stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }}
	cfg, err := parseUpFlags(env, append([]string{"--layout", daemon.LayoutPerGPU}, args...))
	if err != nil {
		t.Fatal(err)
	}
	daemontest.Start(t, func(ctx context.Context, stdout io.Writer, log *slog.Logger) error {
		both := slog.New(slog.NewMultiHandler(log.Handler(), slog.NewTextHandler(logs, nil)))
		return serveUp(ctx, stdout, both, cfg, ln, opts...)
	})
	return cfg.Scheme() + "://" + ln.Addr().String()
}

package daemon_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/daemon"
	"github.com/hearth-llm/hearth/daemon/daemontest"
	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/runtime/docker/dockertest"
)

// TestKVEventSelfCheckThroughDocker: hearth up with its engine in a
// container of the simulated image of each kind, its KV events published
// as the pinned release does or playing each fault (HEARTH_SIM_KV_EVENTS in
// the container's environment). The start-up self-check passes the good
// engines; an engine whose events Hearth cannot match is caught before it
// serves, is routed on predicted caches (a repeated prompt is predicted
// cached although its events never say so), and the finding shows in the
// admin API (hearth engines), on the console's engine card and on the
// Health page (hearth doctor's checks).
func TestKVEventSelfCheckThroughDocker(t *testing.T) {
	cli := dockertest.Client(t)
	cases := []struct {
		engine, fault string
		matched       int
		cause         string
	}{
		{"vllm", "", hruntime.KVProbeBlocks, ""},
		{"sglang", "", hruntime.KVProbeBlocks, ""},
		// Each fault once, the kinds taking turns, to keep the test
		// short (cmd/hearth's TestKVEventSelfCheckThroughProcesses runs
		// the other pairs through processes). SGLang's events store one
		// page each, so a chain named under another seed breaks at the
		// second page.
		{"sglang", hruntime.SimKVEventsWrongHashSeed, 1, "hash chain Hearth cannot follow"},
		{"vllm", hruntime.SimKVEventsUnknownLayout, 0, "field order Hearth does not know"},
		{"sglang", hruntime.SimKVEventsNone, 0, "no KV events arrived"},
	}
	for _, tc := range cases {
		name := tc.engine + "/" + tc.fault
		if tc.fault == "" {
			name = tc.engine + "/good"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			kind := hruntime.Kind(tc.engine)
			image := dockertest.SimImage(t, cli, kind)
			node := dockertest.Node(t, cli)
			// An engine that publishes nothing is caught by waiting out
			// the check's bounds; shorter ones here keep the test short.
			wait := hruntime.DefaultKVCheckWait
			if tc.fault == hruntime.SimKVEventsNone {
				wait = 3 * time.Second
			}
			baseURL, _ := serveTestUp(t, upConfig(t, "--sim", "1x4090", "--engine-runtime", "docker", "--engine", tc.engine,
				"--node", node, "--image", image, "--speedup", "50", "--stop-timeout", "10s"),
				daemon.WithBackoff(hruntime.Backoff{Initial: 200 * time.Millisecond}), daemon.WithKVCheckWait(wait),
				daemon.WithSpecHook(func(s *hruntime.Spec) {
					// The simulated SGLang weighs its host tier against
					// this figure, not the machine's memory.
					s.Env = append(s.Env, hruntime.EnvSimMemAvailableGiB+"=256")
					if tc.fault != "" {
						s.Env = append(s.Env, hruntime.EnvSimKVEvents+"="+tc.fault)
					}
				}))

			engines := listEngines(t, baseURL)
			if len(engines) != 1 || engines[0].State != "ready" || engines[0].Runtime != "docker" || engines[0].Container == "" {
				t.Fatalf("engines %+v, want one ready container", engines)
			}
			e := engines[0]
			c := e.KVEvents
			if tc.fault == "" {
				if c == nil || c.State != "match" || c.Matched != hruntime.KVProbeBlocks {
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
			daemontest.KVFindingShown(t, baseURL, e.Name, e.Model, summary)
		})
	}
}

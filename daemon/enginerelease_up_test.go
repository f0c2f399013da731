package daemon_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/hearth-llm/hearth/daemon"
	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/runtime/docker"
	"github.com/hearth-llm/hearth/runtime/docker/dockertest"
)

// TestOlderImageTagRunsItsRelease: hearth up --image with an older tag of
// the engine's own repository runs that release: with simulated GPUs the
// simulated image, built from this test run's hearth binary, plays it and
// reports it as the real one does (vLLM's /version, SGLang's
// /server_info), and the start-up KV-event self-check follows its events
// (every probe block matched). Which release's facts the daemon then
// speaks is TestPlanEnginesReleaseFromImage's; the events alone do not
// tell, since Hearth's decoder reads either form.
func TestOlderImageTagRunsItsRelease(t *testing.T) {
	cli := dockertest.Client(t)
	bin := dockertest.StaticHearth(t)
	for _, tc := range []struct {
		engine, image, version, versionPath string
	}{
		{"vllm", "vllm/vllm-openai:v0.20.0", "0.20.0", "/version"},
		{"sglang", "lmsysorg/sglang:v0.5.19", "0.5.19", "/server_info"},
	} {
		t.Run(tc.engine, func(t *testing.T) {
			t.Parallel()
			node := dockertest.Node(t, cli)
			cfg := upConfig(t, "--sim", "1x4090", "--engine-runtime", "docker", "--engine", tc.engine,
				"--node", node, "--image", tc.image, "--speedup", "50", "--stop-timeout", "10s")
			// The simulated image is tagged with the daemon's version:
			// one of this test's own, removed at its end.
			cfg.Version = strings.ToLower(node)
			t.Cleanup(func() {
				cli.ImageRemove(context.Background(), docker.SimImage(hruntime.Kind(tc.engine), cfg.Version), client.ImageRemoveOptions{Force: true})
			})
			baseURL, _ := serveTestUp(t, cfg, daemon.WithHearthBinary(bin), daemon.WithBackoff(hruntime.Backoff{Initial: 200 * time.Millisecond}),
				daemon.WithSpecHook(func(s *hruntime.Spec) {
					s.Env = append(s.Env, hruntime.EnvSimMemAvailableGiB+"=256")
				}))
			engines := listEngines(t, baseURL)
			if len(engines) != 1 || engines[0].State != "ready" || engines[0].Runtime != "docker" {
				t.Fatalf("engines %+v, want one ready container", engines)
			}
			e := engines[0]
			resp, err := http.Get(e.BaseURL + tc.versionPath)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var info struct{ Version string }
			if err := json.NewDecoder(resp.Body).Decode(&info); err != nil || info.Version != tc.version {
				t.Errorf("%s%s: version %q (%v), want %s", e.BaseURL, tc.versionPath, info.Version, err, tc.version)
			}
			if c := e.KVEvents; c == nil || c.State != "match" || c.Matched != hruntime.KVProbeBlocks {
				t.Errorf("engine %s KV-event check %+v, want all %d probe blocks matched", e.Name, c, hruntime.KVProbeBlocks)
			}
		})
	}
}

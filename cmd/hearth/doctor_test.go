package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/hearth-llm/hearth/daemon"
	"github.com/hearth-llm/hearth/installer/doctor"
	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/runtime/docker/dockertest"
)

// doctorArgs keeps hearth doctor's disk and port checks inside the test.
func doctorArgs(t *testing.T, extra ...string) []string {
	dir := t.TempDir()
	return append([]string{"doctor", "--data-dir", dir + "/data", "--hf-cache", dir + "/hf", "--listen", "127.0.0.1:0"}, extra...)
}

// decodeDoctorJSON decodes hearth doctor --json strictly: one "checks"
// key, each check exactly name, status, evidence and fix.
func decodeDoctorJSON(t *testing.T, out string) []doctor.Check {
	t.Helper()
	var top map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &top); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if len(top) != 1 || top["checks"] == nil {
		t.Fatalf("top-level keys %v, want only checks", keys(top))
	}
	var raw []map[string]any
	if err := json.Unmarshal(top["checks"], &raw); err != nil {
		t.Fatalf("checks: %v", err)
	}
	var checks []doctor.Check
	for _, r := range raw {
		if got := keys(r); !slices.Equal(got, []string{"evidence", "fix", "name", "status"}) {
			t.Errorf("check keys %v, want evidence, fix, name, status", got)
		}
		for k, v := range r {
			if _, ok := v.(string); !ok {
				t.Errorf("check field %s is %T, want a string", k, v)
			}
		}
		c := doctor.Check{Name: fmt.Sprint(r["name"]), Status: doctor.Status(fmt.Sprint(r["status"])),
			Evidence: fmt.Sprint(r["evidence"]), Fix: fmt.Sprint(r["fix"])}
		if !slices.Contains([]doctor.Status{doctor.Pass, doctor.Warn, doctor.Fail}, c.Status) {
			t.Errorf("%s: status %q, want pass, warn or fail", c.Name, c.Status)
		}
		if c.Evidence == "" || (c.Status == doctor.Pass) != (c.Fix == "") {
			t.Errorf("%s: %+v: want evidence, and a fix exactly when it did not pass", c.Name, c)
		}
		checks = append(checks, c)
	}
	return checks
}

func keys[V any](m map[string]V) []string {
	return slices.Sorted(func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	})
}

func findCheck(t *testing.T, checks []doctor.Check, name string) doctor.Check {
	t.Helper()
	for _, c := range checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %q in %+v", name, checks)
	return doctor.Check{}
}

// dockerAnswers returns the local Docker Engine's runtimes, or skips the
// Docker part of a test, saying why.
func dockerAnswers(t *testing.T) (runtimes []string, ok bool) {
	cli, err := client.New(client.FromEnv)
	if err != nil {
		t.Logf("no Docker client (%v): the Docker checks are not compared", err)
		return nil, false
	}
	defer cli.Close()
	info, err := daemon.DoctorDocker(cli).Info(context.Background())
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no Docker Engine answers, and CI must run the Docker tests: %v", err)
		}
		t.Logf("no Docker Engine answers (%v): the Docker checks are not compared", err)
		return nil, false
	}
	return info.Runtimes, true
}

// TestDoctorOnThisMachine runs hearth doctor --json here, a machine without
// an NVIDIA driver whose Docker Engine, if any, has no NVIDIA runtime.
func TestDoctorOnThisMachine(t *testing.T) {
	if _, err := os.Stat("/dev/nvidiactl"); err == nil {
		t.Skip("skipped: this machine has an NVIDIA GPU, and the test expects none")
	}
	out, _, err := runHearth(t, "", doctorArgs(t, "--json")...)
	if code := exitCode(err); code != 1 {
		t.Errorf("exit status %d (%v), want 1: the driver check fails", code, err)
	}
	checks := decodeDoctorJSON(t, out)
	driver := findCheck(t, checks, doctor.CheckDriver)
	if driver.Status != doctor.Fail || driver.Fix != "install the NVIDIA driver (R580 or newer for CUDA 13 images)" {
		t.Errorf("driver check %+v, want a fail with the install fix", driver)
	}
	for _, name := range []string{doctor.CheckDataDir, doctor.CheckAPIPort} {
		if c := findCheck(t, checks, name); c.Status != doctor.Pass {
			t.Errorf("%s: %+v, want pass in a temporary directory and on port 0", name, c)
		}
	}
	runtimes, ok := dockerAnswers(t)
	if !ok {
		return
	}
	if c := findCheck(t, checks, doctor.CheckDocker); c.Status != doctor.Pass || !strings.Contains(c.Evidence, "Docker Engine") {
		t.Errorf("docker check %+v, want pass with the version", c)
	}
	rt := findCheck(t, checks, doctor.CheckNVIDIARuntime)
	if slices.Contains(runtimes, "nvidia") {
		t.Logf("this Docker Engine has the nvidia runtime: %+v", rt)
		return
	}
	if rt.Status != doctor.Fail || !strings.Contains(rt.Fix, "nvidia-ctk runtime configure --runtime=docker") ||
		!strings.Contains(rt.Fix, "nvidia-ctk cdi generate") {
		t.Errorf("nvidia runtime check %+v, want a fail with the nvidia-ctk fix", rt)
	}
}

func TestDoctorTextAndSimulatedGPUs(t *testing.T) {
	out, stderr, err := runHearth(t, "", doctorArgs(t, "--sim", "1x4090")...)
	if err != nil && exitCode(err) == 2 && strings.Contains(err.Error(), "usage") {
		t.Fatalf("usage error: %v\n%s", err, stderr)
	}
	for _, want := range []string{"pass  nvidia driver", "simulated GPUs", "gpu 0 memory", "Qwen3-14B-FP8 fits", "passed,"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestDoctorDeepOnRealDocker starts the GPU container of --deep on this
// machine's Docker Engine, whose lack of an NVIDIA runtime must make it
// fail cleanly, leaving no container behind.
func TestDoctorDeepOnRealDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short: builds a simulated engine image")
	}
	runtimes, ok := dockerAnswers(t)
	if !ok {
		t.Skip("skipped: no Docker Engine answers")
	}
	if slices.Contains(runtimes, "nvidia") {
		t.Skip("skipped: this Docker Engine has the nvidia runtime, and the test expects none")
	}
	t.Parallel()
	cli := dockertest.Client(t)
	image := dockertest.SimImage(t, cli, hruntime.KindVLLM)
	out, _, err := runHearth(t, "", doctorArgs(t, "--json", "--deep", "--image", image)...)
	if code := exitCode(err); code != 1 {
		t.Errorf("exit status %d (%v), want 1", code, err)
	}
	deep := findCheck(t, decodeDoctorJSON(t, out), doctor.CheckDeepGPU)
	if deep.Status != doctor.Fail || !strings.Contains(deep.Evidence, image) || !strings.Contains(deep.Fix, "nvidia-container-toolkit") {
		t.Errorf("deep check %+v, want a fail naming the image, with the toolkit fix", deep)
	}
	t.Logf("deep check: %s", deep.Evidence)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	left, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", "hearth.doctor")})
	if err != nil {
		t.Fatal(err)
	}
	if len(left.Items) != 0 {
		t.Errorf("%d doctor containers left behind", len(left.Items))
	}

	// An image that is not pulled starts nothing, and says so.
	out, _, _ = runHearth(t, "", doctorArgs(t, "--json", "--deep", "--image", "hearth/not-pulled:none")...)
	if c := findCheck(t, decodeDoctorJSON(t, out), doctor.CheckDeepGPU); c.Status != doctor.Warn || !strings.Contains(c.Evidence, "not pulled") {
		t.Errorf("deep check with an image not pulled: %+v, want a warning", c)
	}
}

func TestExitStatus(t *testing.T) {
	checks := func(statuses ...doctor.Status) []doctor.Check {
		var cs []doctor.Check
		for i, s := range statuses {
			cs = append(cs, doctor.Check{Name: fmt.Sprintf("check %d", i), Status: s})
		}
		return cs
	}
	cases := []struct {
		name string
		err  error
		want int
	}{
		{"success", nil, 0},
		{"doctor: all pass", doctorExit(checks(doctor.Pass, doctor.Pass)), 0},
		{"doctor: a warning", doctorExit(checks(doctor.Pass, doctor.Warn)), 2},
		{"doctor: a failure", doctorExit(checks(doctor.Warn, doctor.Fail)), 1},
		{"chosen status survives wrapping", fmt.Errorf("outer: %w", &exitStatusError{status: 3, msg: "x"}), 3},
		{"bad command line", fmt.Errorf("%w: unknown flag", errUsage), 2},
		{"other error", errors.New("boom"), 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := 0
			if tc.err != nil {
				got = exitCode(tc.err)
			}
			if got != tc.want {
				t.Errorf("exit status %d, want %d (%v)", got, tc.want, tc.err)
			}
		})
	}
	if err := doctorExit(checks(doctor.Pass, doctor.Fail, doctor.Fail)); err == nil || err.Error() != "doctor: 2 checks failed: check 1, check 2" {
		t.Errorf("doctorExit message %v", err)
	}
}

// The SSD tier hearth doctor weighs is where hearth up keeps its node
// store: kvstore in the data directory, or --kv-store-dir.
func TestDoctorChecksTheKVStoreDirHearthUpUses(t *testing.T) {
	env := &environment{stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--data-dir", "/srv/hearth"}, "/srv/hearth/kvstore"},
		{[]string{"--data-dir", "/srv/hearth", "--kv-store-dir", "/nvme/kv"}, "/nvme/kv"},
	} {
		cfg, err := parseDoctorFlags(env, tc.args)
		if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		doc, closeDocker := daemon.NewDoctor(cfg.DoctorConfig)
		closeDocker()
		if got := doc.KVDir; got != tc.want {
			t.Errorf("%q: the SSD tier checked is %s, want %s", tc.args, got, tc.want)
		}
		up, err := parseUpFlags(env, append([]string{"--sim", "1x4090"}, tc.args...))
		if err != nil {
			t.Fatalf("up %q: %v", tc.args, err)
		}
		if up.KVStoreDir != tc.want {
			t.Errorf("up %q keeps its store in %s, the doctor checks %s", tc.args, up.KVStoreDir, tc.want)
		}
	}
}

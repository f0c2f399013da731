package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/hearth-llm/hearth/bench"
	"github.com/hearth-llm/hearth/catalog"
	"github.com/hearth-llm/hearth/runtime/docker/dockertest"
)

// asHearthEnv, set in the environment of this test binary, makes it the
// hearth binary itself: tests run daemons and engines (hearth sim-engine)
// as child processes of it.
const asHearthEnv = "HEARTH_TEST_AS_HEARTH"

func TestMain(m *testing.M) {
	// Under a coding agent's name, it stands in for that client
	// (standin_test.go), whatever else its environment says.
	if name := filepath.Base(os.Args[0]); standInClients[name] != nil {
		os.Exit(runStandIn(name))
	}
	if os.Getenv(asHearthEnv) == "1" {
		main() // exits on error
		os.Exit(0)
	}
	code := m.Run()
	if nsBuild.path != "" {
		os.RemoveAll(filepath.Dir(nsBuild.path))
	}
	dockertest.RemoveBuilds()
	os.Exit(code)
}

// skipUnderRaceForChildBinaries skips a test under -race whose every Hearth
// runs as a separate binary built without the race detector (in network
// namespaces or a container): the detector would see none of Hearth's
// code, so the run would only repeat the plain one, which does run it.
func skipUnderRaceForChildBinaries(t *testing.T) {
	t.Helper()
	if raceDetector {
		t.Skip("skipping under -race: the Hearth under test is a separate binary built without the race detector; the run without -race tests it")
	}
}

// smallLayoutEvaluation is the layout evaluation of the tests of hearth
// plan --agent's and hearth up --agent's wiring: one workload of one round,
// a ninth of the full evaluation's simulation (bench's tests hold the full
// one to its recommendation). On one 4090 it recommends what the full one
// does, FP8 KV with YaRN.
var smallLayoutEvaluation = bench.EvaluationSize{Seeds: 1, Rounds: 1}

// smallLayouts evaluates smallLayoutEvaluation for every test of this
// process, each question once: the simulation is deterministic (bench's
// tests hold it to that), so hearth plan --agent's goldens (text and JSON)
// and hearth up --agent's test, which ask the same question, share one run
// of it, which takes tens of seconds under the race detector. A question
// that differs in any field is simulated anew.
var smallLayouts = &evaluatedOnce{ev: bench.LayoutEvaluator{Size: smallLayoutEvaluation}}

type evaluatedOnce struct {
	ev   bench.LayoutEvaluator
	mu   sync.Mutex
	done []evaluated
}

type evaluated struct {
	req catalog.AgentLayoutRequest
	ev  bench.LayoutEvaluation
}

// Evaluate is ev's, once per question.
func (e *evaluatedOnce) Evaluate(ctx context.Context, req catalog.AgentLayoutRequest) (bench.LayoutEvaluation, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, d := range e.done {
		if reflect.DeepEqual(d.req, req) {
			return d.ev, nil
		}
	}
	ev, err := e.ev.Evaluate(ctx, req)
	if err != nil {
		return ev, err
	}
	e.done = append(e.done, evaluated{req, ev})
	return ev, nil
}

// MeasureLayouts is Evaluate's measures when the candidates are the ones
// Evaluate weighs, and ev's otherwise.
func (e *evaluatedOnce) MeasureLayouts(ctx context.Context, req catalog.AgentLayoutRequest, candidates []catalog.Candidate) ([]catalog.LayoutMeasure, error) {
	if !reflect.DeepEqual(candidates, catalog.AgentCandidates(req.GPUs, req.Model)) {
		return e.ev.MeasureLayouts(ctx, req, candidates)
	}
	ev, err := e.Evaluate(ctx, req)
	if err != nil {
		return nil, err
	}
	return ev.Measures(), nil
}

// WriteRigsPlan is ev's.
func (e *evaluatedOnce) WriteRigsPlan(ctx context.Context, w io.Writer, req catalog.AgentLayoutRequest, uses []catalog.GPUUse, rigs int) error {
	return e.ev.WriteRigsPlan(ctx, w, req, uses, rigs)
}

// runHearth runs the CLI in-process and returns what it printed.
func runHearth(t *testing.T, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	env := &environment{
		stdin:   strings.NewReader(stdin),
		stdout:  &out,
		stderr:  &errOut,
		getenv:  func(string) string { return "" },
		layouts: smallLayouts,
	}
	err = run(context.Background(), env, args)
	return out.String(), errOut.String(), err
}

func TestHelpListsEveryCommandWithItsPurpose(t *testing.T) {
	out, _, err := runHearth(t, "", "--help")
	if err != nil {
		t.Fatalf("--help: %v", err)
	}
	for _, c := range commands() {
		if c.purpose == "" {
			t.Errorf("command %q has no purpose line", c.name)
		}
		if !strings.Contains(out, c.name) || !strings.Contains(out, c.purpose) {
			t.Errorf("--help does not list %q with its purpose:\n%s", c.name, out)
		}
	}
}

func TestUnknownCommandIsAUsageError(t *testing.T) {
	_, errOut, err := runHearth(t, "", "frobnicate")
	if !errors.Is(err, errUsage) {
		t.Fatalf("got %v, want a usage error", err)
	}
	if !strings.Contains(errOut, "Commands:") {
		t.Errorf("usage not printed on stderr: %q", errOut)
	}
	if _, _, err := runHearth(t, ""); !errors.Is(err, errUsage) {
		t.Errorf("no command: got %v, want a usage error", err)
	}
}

func TestVersionRejectsArguments(t *testing.T) {
	out, _, err := runHearth(t, "", "version")
	if err != nil || !strings.HasPrefix(out, "hearth ") {
		t.Fatalf("version: %q, %v", out, err)
	}
	if _, _, err := runHearth(t, "", "version", "extra"); !errors.Is(err, errUsage) {
		t.Errorf("version extra: got %v, want a usage error", err)
	}
}

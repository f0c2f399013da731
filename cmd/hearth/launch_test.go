package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/hearth-llm/hearth/agentclient"
)

// launchContext is the context the daemon of the launch tests serves:
// hearth launch must tell each client this, read from the daemon.
const launchContext = 16384

// launchKey is the API key the daemon of the launch tests requires.
const launchKey = "sk-launch-test"

// launchDaemon starts a daemon on one simulated 4090 that requires
// launchKey, and returns its data directory: hearth launch finds the
// daemon's address there.
func launchDaemon(t *testing.T) (dataDir, baseURL string) {
	t.Helper()
	dataDir = t.TempDir()
	baseURL, _ = serveTestUp(t, []string{"--sim", "1x4090", "--speedup", "100", "--mdns=false",
		"--max-model-len", strconv.Itoa(launchContext), "--api-key", launchKey, "--data-dir", dataDir})
	return dataDir, baseURL
}

// clientsOnPath makes a directory whose clients are this test binary
// under each client's name, the stand-ins.
func clientsOnPath(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name := range standInClients {
		if err := os.Symlink(exe, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// hearthLaunch is `hearth launch args…` as a process of this binary, with
// PATH set to path and env added; the stand-in it becomes writes its
// record to record.
func hearthLaunch(t *testing.T, path, record string, env []string, args ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, append([]string{"launch"}, args...)...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, agentclient.KeyEnv+"=") && !strings.HasPrefix(kv, "ANTHROPIC_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, asHearthEnv+"=1", "PATH="+path, standInRecordEnv+"="+record)
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

func readRecord(t *testing.T, path string) standInRecord {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the client left no record: %v", err)
	}
	var rec standInRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

func exitStatus(err error) int {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// TestLaunch runs hearth launch against one daemon.
//
// hearth launch starts each client with the daemon's settings, found
// from its data directory and its API, and the user's arguments: each
// stand-in makes a working request with what it was given, and exits
// with the status hearth launch then ends with.
func TestLaunch(t *testing.T) {
	dataDir, baseURL := launchDaemon(t)
	path := clientsOnPath(t)
	t.Run("clients", func(t *testing.T) { testLaunchStartsEachClient(t, dataDir, baseURL, path) })
	t.Run("signals", func(t *testing.T) { testLaunchedClientGetsTheSignals(t, dataDir, path) })
	t.Run("refusals", func(t *testing.T) { testLaunchRefusesWithTheFix(t, dataDir, baseURL, path) })
}

func testLaunchStartsEachClient(t *testing.T, dataDir, baseURL, path string) {
	wantOutput := strconv.Itoa(agentclient.OutputTokens(launchContext))
	for _, tc := range []struct {
		client string
		check  func(t *testing.T, rec standInRecord)
	}{
		{"claude", func(t *testing.T, rec standInRecord) {
			for name, want := range map[string]string{
				"ANTHROPIC_BASE_URL":              baseURL,
				"ANTHROPIC_AUTH_TOKEN":            launchKey,
				"CLAUDE_CODE_AUTO_COMPACT_WINDOW": strconv.Itoa(agentclient.ClaudeCodeCompactWindow(launchContext)),
				"CLAUDE_CODE_MAX_OUTPUT_TOKENS":   wantOutput,
			} {
				if rec.Env[name] != want {
					t.Errorf("%s = %q, want %q", name, rec.Env[name], want)
				}
			}
			if v, ok := rec.Env["ANTHROPIC_API_KEY"]; ok {
				t.Errorf("the user's ANTHROPIC_API_KEY reached Claude Code: %q", v)
			}
		}},
		{"codex", func(t *testing.T, rec standInRecord) {
			for _, want := range []string{"model_context_window=" + strconv.Itoa(launchContext), "model_max_output_tokens=" + wantOutput} {
				if !slices.Contains(rec.Args, want) {
					t.Errorf("arguments %q lack -c %s", rec.Args, want)
				}
			}
		}},
		{"opencode", func(t *testing.T, rec standInRecord) {
			want := `"limit":{"context":` + strconv.Itoa(launchContext) + `,"output":` + wantOutput + `}`
			if compact := strings.Join(strings.Fields(rec.Env["OPENCODE_CONFIG_CONTENT"]), ""); !strings.Contains(compact, want) {
				t.Errorf("OPENCODE_CONFIG_CONTENT lacks %s:\n%s", want, rec.Env["OPENCODE_CONFIG_CONTENT"])
			}
		}},
	} {
		t.Run(tc.client, func(t *testing.T) {
			t.Parallel()
			record := filepath.Join(t.TempDir(), "record.json")
			// The key only on hearth launch's command line: what the
			// client sends is what hearth launch gave it.
			cmd := hearthLaunch(t, path, record, []string{"ANTHROPIC_API_KEY=sk-ant-the-users-own"},
				tc.client, "--data-dir", dataDir, "--api-key", launchKey, "--", "--exit", "7", "list the files")
			out, err := cmd.CombinedOutput()
			rec := readRecord(t, record)
			if rec.Err != "" {
				t.Fatalf("the client's request failed: %s\nhearth launch said:\n%s", rec.Err, out)
			}
			if status := exitStatus(err); status != 7 {
				t.Errorf("hearth launch ended with %d (%v), want the client's 7:\n%s", status, err, out)
			}
			if n := len(rec.Args); n < 3 || !slices.Equal(rec.Args[n-3:], []string{"--exit", "7", "list the files"}) {
				t.Errorf("the client got arguments %q, want the user's last", rec.Args)
			}
			if rec.Answer == "" || rec.MaxTokens != agentclient.OutputTokens(launchContext) {
				t.Errorf("answer %q with max tokens %d, want an answer with %d", rec.Answer, rec.MaxTokens, agentclient.OutputTokens(launchContext))
			}
			tc.check(t, rec)
		})
	}
}

// The client becomes hearth launch's process: a signal sent to it reaches
// the client, whose status is then hearth launch's.
func testLaunchedClientGetsTheSignals(t *testing.T, dataDir, path string) {
	record := filepath.Join(t.TempDir(), "record.json")
	cmd := hearthLaunch(t, path, record, []string{"HEARTH_API_KEY=" + launchKey},
		"claude", "--data-dir", dataDir, "--", "--wait-signal")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if line != "waiting\n" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("the client said %q (%v); record: %+v", line, err, readRecord(t, record))
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if status := exitStatus(cmd.Wait()); status != 42 {
		t.Errorf("status %d, want 42, the client's after SIGTERM", status)
	}
}

// What stops hearth launch before a client starts says what to do: a
// refused key, a daemon that does not run, a client not installed.
func testLaunchRefusesWithTheFix(t *testing.T, dataDir, baseURL, path string) {
	empty := t.TempDir()
	for _, tc := range []struct {
		name string
		path string
		env  []string
		args []string
		want string
	}{
		{"wrong key", path, []string{"HEARTH_API_KEY=sk-wrong"}, []string{"claude", "--data-dir", dataDir}, "--api-key or $HEARTH_API_KEY"},
		{"no daemon", path, []string{"HEARTH_API_KEY=" + launchKey}, []string{"codex", "--data-dir", t.TempDir(), "--addr", "http://127.0.0.1:1"}, "is hearth up running at http://127.0.0.1:1?"},
		{"not installed", empty, []string{"HEARTH_API_KEY=" + launchKey}, []string{"codex", "--addr", baseURL}, "install it with: npm install -g @openai/codex"},
		{"unknown client", path, nil, []string{"vim"}, `unknown client "vim"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			record := filepath.Join(t.TempDir(), "record.json")
			out, err := hearthLaunch(t, tc.path, record, tc.env, tc.args...).CombinedOutput()
			if exitStatus(err) == 0 || !strings.Contains(string(out), tc.want) {
				t.Errorf("status %d, output:\n%s\nwant a failure saying %q", exitStatus(err), out, tc.want)
			}
			if _, err := os.Stat(record); err == nil {
				t.Errorf("a client ran: %+v", readRecord(t, record))
			}
		})
	}
}

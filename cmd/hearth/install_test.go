package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hearth-llm/hearth/daemon"
	"github.com/hearth-llm/hearth/installer"
	"github.com/hearth-llm/hearth/tlsca"
)

// hearthWithEnv runs the CLI in-process with the given variables.
func hearthWithEnv(vars map[string]string, args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	env := &environment{stdin: strings.NewReader(""), stdout: &out, stderr: &errOut, getenv: func(k string) string { return vars[k] }}
	err = run(context.Background(), env, args)
	return out.String(), errOut.String(), err
}

func writeTestFile(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "hearth.toml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The configuration reaches hearth up's parsed config: file < env < flag.
func TestUpConfigPrecedence(t *testing.T) {
	file := writeTestFile(t, `
sim = "2x4090"
kvbm = "ram"
listen = "127.0.0.1:9001"
policy = "kv"
seed = 7
alias = ["claude-*=qwen3-8b"]
model = "qwen3-8b"
`)
	vars := map[string]string{
		"HEARTH_LISTEN": "127.0.0.1:9002",
		"HEARTH_SEED":   "8",
		// A client's key must not become one the server asks for.
		"HEARTH_API_KEY": "sk-client",
	}
	env := &environment{stderr: &bytes.Buffer{}, getenv: func(k string) string { return vars[k] }}
	cfg, err := parseUpFlags(env, []string{"--config", file, "--seed", "9"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Sim != "2x4090" || cfg.Tiers != "ram" || cfg.Policy != "kv" {
		t.Errorf("from the file: sim %q kvbm %q policy %q", cfg.Sim, cfg.Tiers, cfg.Policy)
	}
	if cfg.Listen != "127.0.0.1:9002" {
		t.Errorf("listen %q, want the variable's", cfg.Listen)
	}
	if cfg.Seed != 9 {
		t.Errorf("seed %d, want the flag's 9", cfg.Seed)
	}
	if cfg.Aliases["claude-*"] != "qwen3-8b" || len(cfg.APIKeys) != 0 {
		t.Errorf("aliases %v, api keys %q", cfg.Aliases, cfg.APIKeys)
	}
	// HEARTH_CONFIG names the file when --config does not.
	vars["HEARTH_CONFIG"] = file
	cfg, err = parseUpFlags(env, nil)
	if err != nil || cfg.Policy != "kv" {
		t.Errorf("with $HEARTH_CONFIG: policy %q, err %v", cfg.Policy, err)
	}
}

func TestUpConfigErrors(t *testing.T) {
	cases := []struct {
		name string
		file string
		args []string
		want []string
	}{
		{"misspelt key", "sim = \"1x4090\"\nlisten_addr = \"x\"\n", nil, []string{`unknown key "listen_addr"`, "hearth.toml"}},
		{"missing named file", "", []string{"--config", "/nonexistent/hearth.toml"}, []string{"/nonexistent/hearth.toml"}},
		{"bad value", "sim = \"1x4090\"\ntp = \"x\"\n", nil, []string{"tp"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if args == nil {
				args = []string{"--config", writeTestFile(t, tc.file)}
			}
			_, err := parseUpFlags(&environment{stderr: &bytes.Buffer{}, getenv: func(string) string { return "" }}, args)
			if !errors.Is(err, errUsage) {
				t.Fatalf("err %v, want a usage error", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// The default configuration file is read only when it exists, and tests'
// environments (upConfigFile "") read none.
func TestUpDefaultConfigFile(t *testing.T) {
	file := writeTestFile(t, "sim = \"1x4090\"\npolicy = \"kv\"\n")
	env := &environment{stderr: &bytes.Buffer{}, getenv: func(string) string { return "" }, upConfigFile: file}
	if cfg, err := parseUpFlags(env, nil); err != nil || cfg.Policy != "kv" {
		t.Errorf("default file: policy %q, err %v", cfg.Policy, err)
	}
	env.upConfigFile = filepath.Join(t.TempDir(), "absent.toml")
	if cfg, err := parseUpFlags(env, []string{"--sim", "1x4090"}); err != nil || cfg.Policy != "hearth" {
		t.Errorf("absent default file: policy %q, err %v", cfg.Policy, err)
	}
}

func TestConfigCommand(t *testing.T) {
	file := writeTestFile(t, "kvbm = \"ram\"\napi-key = [\"sk-secret\"]\n")
	out, _, err := hearthWithEnv(map[string]string{"HEARTH_LISTEN": "127.0.0.1:9002", "HEARTH_CONFIG": file}, "config", "--policy", "kv")
	if err != nil {
		t.Fatal(err)
	}
	lines := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if k, _, ok := strings.Cut(l, " = "); ok {
			lines[k] = strings.Join(strings.Fields(l), " ")
		}
	}
	for key, want := range map[string]string{
		"kvbm":    `kvbm = "ram" # file ` + file,
		"listen":  `listen = "127.0.0.1:9002" # env HEARTH_LISTEN`,
		"policy":  `policy = "kv" # flag`,
		"tp":      `tp = 1 # default`,
		"api-key": `api-key = ["(hidden)"] # file ` + file,
		"alias":   `alias = [] # default`,
	} {
		if lines[key] != want {
			t.Errorf("%s: %q, want %q", key, lines[key], want)
		}
	}
	if strings.Contains(out, "sk-secret") {
		t.Error("hearth config printed an API key")
	}
	if !strings.Contains(out, "# configuration file: "+file) {
		t.Errorf("output does not name the file:\n%s", out)
	}
	// Every flag of hearth up is listed but --config.
	fs := flag.NewFlagSet("up", flag.ContinueOnError)
	daemon.RegisterFlags(fs, &daemon.Config{}, daemon.Env{})
	fs.VisitAll(func(f *flag.Flag) {
		if _, ok := lines[f.Name]; !ok && f.Name != "config" {
			t.Errorf("hearth config does not list %s", f.Name)
		}
	})
}

// The installed configuration file is generated from hearth up's flags:
// the golden file shows a change to them, and the file read back with
// every key uncommented sets every flag, from the file.
func TestServiceConfigGolden(t *testing.T) {
	got, err := daemon.ConfigTemplate(installer.ServiceConfig())
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "hearth.toml.golden")
	if *updateGolden {
		os.WriteFile(golden, got, 0o644)
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("hearth.toml differs from %s (go test ./cmd/hearth -run ServiceConfigGolden -update):\n%s", golden, got)
	}
	var all strings.Builder
	for _, l := range strings.Split(string(got), "\n") {
		if strings.HasPrefix(l, "# ") && strings.Contains(l, " = ") {
			l = strings.TrimPrefix(l, "# ")
		}
		all.WriteString(l + "\n")
	}
	file := writeTestFile(t, all.String())
	out, _, err := hearthWithEnv(nil, "config", "--config", file)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(out, "\n") {
		// An empty function flag (sim-tool-calls = "") stays unset.
		if strings.Contains(l, " = ") && !strings.Contains(l, "# file "+file) && !strings.Contains(l, `= "" `) {
			t.Errorf("not from the file: %s", l)
		}
	}
	// The service's own values are set, not commented.
	for _, want := range []string{"\ndata-dir = \"/var/lib/hearth\"\n", "\nkeep-engines = true\n", "\nengine = \"vllm\"\n"} {
		if !strings.Contains(string(got), want) {
			t.Errorf("hearth.toml lacks %q", want)
		}
	}
}

func TestInstallCommandUnderRoot(t *testing.T) {
	root := t.TempDir()
	bin := filepath.Join(t.TempDir(), "hearth")
	os.WriteFile(bin, []byte("#!/bin/sh\necho hearth test\n"), 0o755)
	out, _, err := hearthWithEnv(nil, "install", "--root", root, "--force", "--binary", bin)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"Checking the host (hearth doctor)", "would run: useradd", "would run: systemctl enable --now hearth.service"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	config, err := os.ReadFile(filepath.Join(root, installer.ConfigPath))
	want, _ := daemon.ConfigTemplate(installer.ServiceConfig())
	if err != nil || !bytes.Equal(config, want) {
		t.Errorf("installed hearth.toml differs from the generated one (%v)", err)
	}
	unit, err := os.ReadFile(filepath.Join(root, installer.UnitPath))
	if err != nil || string(unit) != installer.Unit(true) {
		t.Errorf("unit: %v", err)
	}
	// The installed configuration gives hearth up a valid command line.
	vars := map[string]string{"HEARTH_CONFIG": filepath.Join(root, installer.ConfigPath)}
	cfg, err := parseUpFlags(&environment{stderr: &bytes.Buffer{}, getenv: func(k string) string { return vars[k] }}, nil)
	if err != nil || !cfg.KeepEngines || cfg.DataDir != installer.DataDir || cfg.EngineRuntime != "docker" || cfg.HFCache != installer.HFCacheDir {
		t.Errorf("hearth up with the installed config: %+v, %v", cfg, err)
	}

	out, _, err = hearthWithEnv(nil, "uninstall", "--root", root)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(root, installer.BinPath)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("binary remains: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, installer.ConfigPath)); err != nil {
		t.Errorf("uninstall without --purge removed the config: %v", err)
	}
}

func TestInstallDryRunWritesNothing(t *testing.T) {
	root := t.TempDir()
	out, _, err := hearthWithEnv(nil, "install", "--root", root, "--dry-run")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if entries, _ := os.ReadDir(root); len(entries) > 0 {
		t.Errorf("dry run wrote %v", entries)
	}
	if !strings.Contains(out, "would write /etc/hearth/hearth.toml") || !strings.Contains(out, "would run: hearth doctor") {
		t.Errorf("plan:\n%s", out)
	}
}

// hearth upgrade polls /health on the installed configuration's address,
// and rolls back when nothing answers there.
func TestUpgradeCommand(t *testing.T) {
	root := t.TempDir()
	dir := t.TempDir()
	old := filepath.Join(dir, "old")
	os.WriteFile(old, []byte("#!/bin/sh\necho hearth v1\n"), 0o755)
	if _, _, err := hearthWithEnv(nil, "install", "--root", root, "--force", "--binary", old); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			w.Write([]byte(`{"status":"ok"}`))
			return
		}
		http.NotFound(w, r)
	})}
	go srv.Serve(ln)
	defer srv.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	config := filepath.Join(root, installer.ConfigPath)
	text, _ := os.ReadFile(config)
	os.WriteFile(config, append(text, []byte("listen = \"0.0.0.0:"+port+"\"\n")...), 0o644)

	url, client, err := installedHealth(&environment{getenv: func(string) string { return "" }}, installer.Layout{Root: root})
	if want := "http://127.0.0.1:" + port + "/health"; err != nil || url != want || client != nil {
		t.Fatalf("health URL %q (%v), want %q", url, err, want)
	}
	newBin := filepath.Join(dir, "new")
	os.WriteFile(newBin, []byte("#!/bin/sh\necho hearth v2\n"), 0o755)
	out, _, err := hearthWithEnv(nil, "upgrade", "--root", root, "--health-timeout", "2s", newBin)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "would run: systemctl restart hearth.service") || !strings.Contains(out, "healthy on hearth v2") {
		t.Errorf("output:\n%s", out)
	}
	srv.Close()
	third := filepath.Join(dir, "third")
	os.WriteFile(third, []byte("#!/bin/sh\necho hearth v3\n"), 0o755)
	start := time.Now()
	out, _, err = hearthWithEnv(nil, "upgrade", "--root", root, "--health-timeout", "200ms", third)
	if !errors.Is(err, installer.ErrRolledBack) {
		t.Fatalf("err %v, want a rollback\n%s", err, out)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("the rollback took %v", time.Since(start))
	}
	if got, _ := os.ReadFile(filepath.Join(root, installer.BinPath)); !strings.Contains(string(got), "hearth v2") {
		t.Errorf("after the rollback the binary is %q, want v2", got)
	}
}

// TestUpgradeHealthOverTLS: a service installed with --tls auto is polled
// over HTTPS, trusting the CA in its data directory, and the poll fails
// against a server whose certificate another CA issued.
func TestUpgradeHealthOverTLS(t *testing.T) {
	root := t.TempDir()
	old := filepath.Join(t.TempDir(), "old")
	os.WriteFile(old, []byte("#!/bin/sh\necho hearth v1\n"), 0o755)
	if _, _, err := hearthWithEnv(nil, "install", "--root", root, "--force", "--binary", old); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	serve := func(caDir string) (port string) {
		ca, err := tlsca.LoadOrCreate(caDir, "test", now)
		if err != nil {
			t.Fatal(err)
		}
		cert, err := ca.ServerCertificate(tlsca.LocalNames("", nil), now)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
		srv.TLS = tlsca.ServerConfig(cert)
		srv.StartTLS()
		t.Cleanup(srv.Close)
		_, port, _ = net.SplitHostPort(srv.Listener.Addr().String())
		return port
	}
	port := serve(filepath.Join(root, installer.DataDir, "tls"))
	config := filepath.Join(root, installer.ConfigPath)
	text, _ := os.ReadFile(config)
	os.WriteFile(config, append(text, []byte("listen = \"0.0.0.0:"+port+"\"\ntls = \"auto\"\n")...), 0o644)
	env := &environment{getenv: func(string) string { return "" }}
	url, client, err := installedHealth(env, installer.Layout{Root: root})
	if want := "https://127.0.0.1:" + port + "/health"; err != nil || url != want || client == nil {
		t.Fatalf("health URL %q (%v), want %q with a client", url, err, want)
	}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("health over TLS with the installed CA: %v", err)
	}
	resp.Body.Close()
	other := serve(t.TempDir())
	if resp, err := client.Get("https://127.0.0.1:" + other + "/health"); err == nil {
		resp.Body.Close()
		t.Error("the health client trusted a certificate of another CA")
	}
}

// TestConfigHidesSecrets: hearth config shows no join token, from the
// command line or the environment, and counts the server's keys from
// $HEARTH_SERVER_API_KEYS as hearth up does, hidden.
func TestConfigHidesSecrets(t *testing.T) {
	const token = "hearth1-AAAAsecretsecretsecret"
	for _, tc := range []struct {
		name string
		vars map[string]string
		args []string
		key  string
		want string
	}{
		{"--join", nil, []string{"--join", token}, "join", `join = "(hidden)" # flag`},
		{"HEARTH_JOIN", map[string]string{"HEARTH_JOIN": token}, nil, "join", `join = "(hidden)" # env HEARTH_JOIN`},
		{"HEARTH_SERVER_API_KEYS", map[string]string{"HEARTH_SERVER_API_KEYS": "sk-one," + token}, nil, "api-key", `api-key = ["(hidden)", "(hidden)"] # env HEARTH_SERVER_API_KEYS`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := hearthWithEnv(tc.vars, append([]string{"config"}, tc.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(out, token) || strings.Contains(out, "sk-one") {
				t.Errorf("hearth config printed a secret:\n%s", out)
			}
			got := ""
			for _, l := range strings.Split(out, "\n") {
				if k, _, ok := strings.Cut(l, " = "); ok && k == tc.key {
					got = strings.Join(strings.Fields(l), " ")
				}
			}
			if got != tc.want {
				t.Errorf("%q, want %q", got, tc.want)
			}
		})
	}
}

// TestJoinFromFileOrStdin: --join-file reads the token from a file, or
// from standard input with "-", so that it shows in no process list.
func TestJoinFromFileOrStdin(t *testing.T) {
	const token = "hearth1-AAAAsecretsecretsecret"
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	parse := func(stdin string, vars map[string]string, args ...string) (daemon.Config, error) {
		env := &environment{stdin: strings.NewReader(stdin), stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}, getenv: func(k string) string { return vars[k] }}
		return parseUpFlags(env, append([]string{"--sim", "1x4090"}, args...))
	}
	for name, run := range map[string]func() (daemon.Config, error){
		"file":             func() (daemon.Config, error) { return parse("", nil, "--join-file", file) },
		"stdin":            func() (daemon.Config, error) { return parse(token+"\n", nil, "--join-file", "-") },
		"HEARTH_JOIN_FILE": func() (daemon.Config, error) { return parse("", map[string]string{"HEARTH_JOIN_FILE": file}) },
	} {
		cfg, err := run()
		if err != nil || cfg.Cluster.Join != token {
			t.Errorf("%s: join %q, err %v", name, cfg.Cluster.Join, err)
		}
	}
	if _, err := parse("", nil, "--join", token, "--join-file", file); !errors.Is(err, errUsage) {
		t.Errorf("--join with --join-file: %v, want a usage error", err)
	}
	if _, err := parse("", nil, "--join-file", filepath.Join(t.TempDir(), "absent")); err == nil {
		t.Error("a missing --join-file was accepted")
	}
	if _, err := parse("  \n", nil, "--join-file", "-"); err == nil {
		t.Error("an empty token was accepted")
	}
}

// The installed configuration serves real GPUs with vLLM, keeping its
// engine containers across restarts; setting sim alone in it (or through
// HEARTH_SIM) must run simulated GPUs in the daemon, not fail on the
// real-GPU choices the file also makes.
func TestInstalledConfigWithSimAlone(t *testing.T) {
	text, err := daemon.ConfigTemplate(installer.ServiceConfig())
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(text), "\n# sim = \"\"\n", "\nsim = \"2x4090\"\n", 1)
	if edited == string(text) {
		t.Fatal(`the generated configuration has no "# sim = \"\"" line to edit`)
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		name, file   string
		vars         map[string]string
		args         []string
		runtime      string
		engine       string
		keepEngines  bool
		wantErrorHas string
	}{
		{name: "as installed", file: string(text), runtime: "docker", engine: "vllm", keepEngines: true},
		{name: "sim in the file", file: edited, runtime: "sim"},
		{name: "sim in the environment", file: string(text), vars: map[string]string{"HEARTH_SIM": "1x4090"}, runtime: "sim"},
		{name: "sim in the file, images asked for", file: edited, args: []string{"--engine-runtime", "docker"}, runtime: "docker", engine: "vllm", keepEngines: true},
		{name: "sim and engine both on the command line", file: string(text), args: []string{"--sim", "1x4090", "--engine", "sglang"},
			wantErrorHas: "--sim and --engine go together only with --engine-runtime docker"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".toml")
			if err := os.WriteFile(path, []byte(tc.file), 0o644); err != nil {
				t.Fatal(err)
			}
			var stderr bytes.Buffer
			env := &environment{stdout: io.Discard, stderr: &stderr, getenv: func(k string) string { return tc.vars[k] }}
			cfg, err := parseUpFlags(env, append([]string{"--config", path, "--data-dir", dir}, tc.args...))
			if tc.wantErrorHas != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErrorHas) {
					t.Fatalf("err = %v, want one saying %q", err, tc.wantErrorHas)
				}
				return
			}
			if err != nil {
				t.Fatalf("hearth up with this configuration: %v", err)
			}
			if cfg.EngineRuntime != tc.runtime || cfg.Engine != tc.engine || cfg.KeepEngines != tc.keepEngines {
				t.Errorf("runtime %q engine %q keep-engines %v, want %q %q %v",
					cfg.EngineRuntime, cfg.Engine, cfg.KeepEngines, tc.runtime, tc.engine, tc.keepEngines)
			}
		})
	}
}

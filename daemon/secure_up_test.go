package daemon_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hearth-llm/hearth/daemon"
)

func TestUpRefusesEveryAddressWithoutKeys(t *testing.T) {
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Skipf("cannot listen on 0.0.0.0 here: %v", err)
	}
	cfg := upConfig(t, "--sim", "1x4090", "--listen", ln.Addr().String(), "--tls", "auto")
	err = daemon.Run(context.Background(), cfg, ln, io.Discard, slog.New(slog.DiscardHandler))
	if !errors.Is(err, daemon.ErrUsage) || !strings.Contains(err.Error(), "--api-key") || !strings.Contains(err.Error(), daemon.ServerKeysEnv) {
		t.Fatalf("serveUp on %s without keys: %v, want a usage error naming --api-key and $%s", ln.Addr(), err, daemon.ServerKeysEnv)
	}
}

// TestUpServesTLSWithItsOwnCA starts hearth up --tls auto and reaches it
// through Go's client and curl, each trusting only the CA the daemon left
// in its data directory.
func TestUpServesTLSWithItsOwnCA(t *testing.T) {
	dataDir := t.TempDir()
	baseURL, _ := serveTestUp(t, upConfig(t, "--sim", "1x4090", "--data-dir", dataDir, "--tls", "auto"))
	if !strings.HasPrefix(baseURL, "https://") {
		t.Fatalf("base URL %s is not https", baseURL)
	}
	caPath := filepath.Join(dataDir, "tls", "ca.pem")
	caPEM, err := os.ReadFile(caPath)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("ca.pem does not parse")
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	// localhost is a name the certificate holds, next to 127.0.0.1.
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(baseURL, "https://"))
	for _, u := range []string{baseURL + "/v1/models", "https://localhost:" + port + "/v1/models"} {
		resp, err := client.Get(u)
		if err != nil {
			t.Fatalf("GET %s trusting the CA: %v", u, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "qwen3") {
			t.Fatalf("GET %s: %d %s", u, resp.StatusCode, body)
		}
	}
	if _, err := http.Get(baseURL + "/health"); err == nil {
		t.Fatal("a client trusting only the system roots connected")
	}
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl not installed: the curl --cacert half of this test needs it")
	}
	out, err := exec.Command(curl, "-sS", "--noproxy", "*", "--cacert", caPath, "https://localhost:"+port+"/health").CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"ok"`) {
		t.Fatalf("curl --cacert %s: %v: %s", caPath, err, out)
	}
}

package daemon

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/hearth-llm/hearth/adminapi"
)

// headerRecorder is a listener on a loopback port that keeps the local
// token of every request it gets: another local user's, waiting for it.
type headerRecorder struct {
	mu     sync.Mutex
	tokens []string
}

func (r *headerRecorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.tokens = append(r.tokens, req.Header.Get(adminapi.LocalTokenHeader))
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Write([]byte(`{"engines":[],"outcome":"left"}`))
}

func (r *headerRecorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.tokens...)
}

// TestAdminClientSendsTheLocalTokenOnlyToItsDaemon: the command line
// sends the daemon's local token only to the address the daemon wrote
// beside it; to any other loopback port (hearth cluster leave --addr
// http://127.0.0.1:OTHER) it sends none, so another local user listening
// there does not catch it.
func TestAdminClientSendsTheLocalTokenOnlyToItsDaemon(t *testing.T) {
	t.Parallel()
	var daemon, other headerRecorder
	daemonSrv := httptest.NewServer(&daemon)
	defer daemonSrv.Close()
	otherSrv := httptest.NewServer(&other)
	defer otherSrv.Close()
	data := DataDir(t.TempDir())
	token, err := adminapi.WriteLocalToken(data.LocalToken())
	if err != nil {
		t.Fatal(err)
	}
	if err := writeLocalAddr(data, daemonSrv.URL); err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{daemonSrv.URL, otherSrv.URL} {
		c, err := AdminClient(addr, "", data)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Leave(context.Background()); err != nil {
			t.Fatalf("leave at %s: %v", addr, err)
		}
	}
	if got := other.got(); len(got) != 1 || got[0] != "" {
		t.Errorf("the other listener got local tokens %q, want one request without", got)
	}
	if got := daemon.got(); len(got) != 1 || got[0] != token {
		t.Errorf("the daemon got local tokens %q, want its own", got)
	}
}

package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"strings"

	"github.com/hearth-llm/hearth/adminapi"
	"github.com/hearth-llm/hearth/agentclient"
)

// DefaultAddr is where the command line looks for a daemon when neither
// --addr nor the data directory (DataDir.Address) says.
const DefaultAddr = "http://127.0.0.1:8000"

// ErrKeyRefused is wrapped by AskServed's error when the API refused the
// key.
var ErrKeyRefused = errors.New("the API refused the key")

// DaemonAddr is the daemon's URL for the command line: addr when set,
// else the one the daemon running with data recorded (DataDir.LocalAddr),
// else DefaultAddr.
func DaemonAddr(addr string, data DataDir) (string, error) {
	if addr != "" {
		return addr, nil
	}
	b, err := os.ReadFile(data.LocalAddr())
	if errors.Is(err, fs.ErrNotExist) {
		return DefaultAddr, nil
	}
	if err != nil {
		return "", fmt.Errorf("the daemon's address: %w", err)
	}
	if recorded := strings.TrimSpace(string(b)); recorded != "" {
		return recorded, nil
	}
	return DefaultAddr, nil
}

// AskServed asks the daemon's API at addr, with key, what it serves: GET
// /v1/models, the request every client's first one follows, answered only
// for a key the API takes. Over https it trusts Hearth's own CA under
// data. The answer is the served models and the served context
// (max_model_len), as agentclient tells the clients.
func AskServed(ctx context.Context, addr, key string, data DataDir) (agentclient.Served, error) {
	addr = strings.TrimSuffix(addr, "/")
	served := agentclient.Served{BaseURL: addr, Key: key}
	hc := http.DefaultClient
	if strings.HasPrefix(addr, "https://") {
		var err error
		if hc, err = adminapi.HTTPClientTrusting(data.TLSCA()); err != nil {
			return served, err
		}
		served.CAFile = data.TLSCA()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, addr+"/v1/models", nil)
	if err != nil {
		return served, fmt.Errorf("%w: the daemon's address %q: %v", ErrUsage, addr, err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := hc.Do(req)
	if err != nil {
		return served, fmt.Errorf("is hearth up running at %s? %w", addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return served, fmt.Errorf("the daemon's models: %w", err)
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusUnauthorized, http.StatusForbidden:
		return served, fmt.Errorf("%w (%s): pass a key with --api-key or $HEARTH_API_KEY; the console's Connect page makes one", ErrKeyRefused, resp.Status)
	default:
		return served, fmt.Errorf("the daemon at %s answered GET /v1/models with %s: %s", addr, resp.Status, strings.TrimSpace(string(body)))
	}
	var list struct {
		Data []struct {
			ID          string `json:"id"`
			MaxModelLen int    `json:"max_model_len"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return served, fmt.Errorf("the daemon's models: %w", err)
	}
	if len(list.Data) == 0 {
		return served, fmt.Errorf("the daemon at %s serves no model", addr)
	}
	for _, m := range list.Data {
		served.Models = append(served.Models, m.ID)
		if m.MaxModelLen > 0 && (served.ContextTokens == 0 || m.MaxModelLen < served.ContextTokens) {
			served.ContextTokens = m.MaxModelLen // the tightest, should the models differ
		}
	}
	return served, nil
}

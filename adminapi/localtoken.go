package adminapi

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/hearth-llm/hearth/atomicfile"
)

// The local token is how the hearth command on the daemon's machine shows
// /api/v1 that a person at that machine sent a state-changing request,
// not a web page: the daemon writes a new random token at each start to
// LocalTokenFile in its data directory, readable by its user only, and the
// command sends it in LocalTokenHeader. A page in a browser can read
// neither the file nor another origin's answers, and cannot add the
// header to a cross-origin request without a CORS preflight, which the
// daemon never grants.
const (
	LocalTokenFile = "local-token"
	// LocalTokenHeader is the header the console's Guard reads
	// (console.LocalTokenHeader).
	LocalTokenHeader = "Hearth-Local-Token"
)

// WriteLocalToken makes a new local token and writes it, mode 0600, to
// path (LocalTokenFile in the daemon's data directory), replacing the
// last start's.
func WriteLocalToken(path string) (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("adminapi: local token: %w", err)
	}
	token := hex.EncodeToString(b)
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("adminapi: local token: %w", err)
	}
	// Written whole or not at all: a command reading it while the daemon
	// starts never sees half a token.
	if err := atomicfile.Write(path, []byte(token+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("adminapi: local token: %w", err)
	}
	return token, nil
}

// ReadLocalToken reads the token a daemon wrote to path; "" when there is
// none or this user cannot read it (then the command needs an admin API
// key).
func ReadLocalToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("adminapi: local token: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// Package apikey defines what an API key is to every part of Hearth that
// handles one: its description without the secret (Key) and the scopes
// that say what it opens. The store (api/store) keeps keys, the console
// shows them and lets the owner make and revoke them, and both need the
// same names for the same scopes; this leaf holds them once.
//
// It imports nothing and does no I/O, so that the console, which may
// import no other Hearth package, can use it.
package apikey

import "time"

// Key describes a key without its secret.
type Key struct {
	ID   string
	Name string // the client it was made for ("claude-code on laptop")
	Hint string // "sk-hearth-…a1b2": enough to tell keys apart
	// Scope is ScopeInference or ScopeAdmin.
	Scope   string
	Created time.Time
	// LastUsed is when the key last opened a request, to the minute; zero
	// if never or unknown.
	LastUsed time.Time
}

// Scopes of a key: what it opens.
const (
	// ScopeInference opens the inference API (/v1/…) only: what clients'
	// keys need.
	ScopeInference = "inference"
	// ScopeAdmin also opens the daemon's API (/api/v1/…), /metrics from
	// the network and, before the owner's password is set, the console.
	ScopeAdmin = "admin"
)

// ValidScope reports whether s names a scope.
func ValidScope(s string) bool { return s == ScopeInference || s == ScopeAdmin }

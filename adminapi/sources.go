package adminapi

import (
	"context"
	"errors"
)

// Sources is what the API reads from the daemon.
type Sources struct {
	Engines  Engines
	Sessions Sessions
	// Cluster is nil when the node belongs to no cluster: the nodes and
	// join requests are then empty lists and the operations answer 409.
	Cluster Cluster
	// Drain is this node's drain; nil answers 404 on /api/v1/node.
	Drain Drain
	// Models is nil when every model has GPUs of its own: the list is
	// then the engines' models, all resident, and the operations answer
	// 409.
	Models Models
}

// Drain is whether this node takes new requests.
type Drain interface {
	// Drain returns the node's drain as it stands.
	Drain() NodeDrain
	// SetManual drains the node by hand (true) or ends that drain
	// (false; a drain for a taken GPU holds on) and returns the drain.
	SetManual(drained bool) NodeDrain
}

// Models are the models served on demand (docs/models.md). Their
// operations return an error marked NotFound (no such model) or Conflict
// (the model is busy or pinned) to choose the answer's status.
type Models interface {
	Models() []Model
	// Load makes a model resident; Unload puts it to sleep (or stops its
	// engine); Pin pins or unpins it.
	Load(ctx context.Context, name string) error
	Unload(ctx context.Context, name string) error
	Pin(name string, pinned bool) error
}

// Engines are the daemon's supervised engines.
type Engines interface {
	// Engines returns every engine, in the daemon's order.
	Engines() []Engine
	// Logs returns an engine's last output lines; false when no engine
	// has that name.
	Logs(name string) ([]string, bool)
	// FollowLogs returns the first page of a followed log: the lines kept
	// now; false when no engine has that name.
	FollowLogs(name string) (LogPage, bool)
}

// LogPage is a page of a followed log.
type LogPage struct {
	Lines []string // without line breaks
	// NewRun says Lines start a run after the previous page's: the engine
	// was launched again.
	NewRun bool
	// More is closed once the engine writes a line after Lines; nil when
	// its runtime cannot tell (then only Relaunched brings news).
	More <-chan struct{}
	// Relaunched is closed when the engine is launched again.
	Relaunched <-chan struct{}
	// Next returns the page after this one, once More or Relaunched is
	// closed.
	Next func() LogPage
}

// Sessions are the agent sessions the gateway keeps.
type Sessions interface {
	// Sessions returns them most recently active first, each with its
	// requests in order of arrival.
	Sessions() []Session
}

// Cluster is the cluster this node belongs to. Its operations return an
// error marked NotFound or Conflict to choose the answer's status; the
// error's message is the answer's.
type Cluster interface {
	// Nodes returns the cluster's members, this node among them.
	Nodes() NodeList
	// Revoke revokes a node's certificate.
	Revoke(nodeID string) error
	// JoinRequests returns the join requests waiting for the owner.
	JoinRequests() JoinRequestList
	AcceptJoin(requestID string) error
	RejectJoin(requestID string) error
	// Leave takes this node out of the cluster and forgets its identity:
	// the node's ID; warning when the cluster could not be told (the node
	// has left all the same); err when the identity is still there.
	Leave() (nodeID string, warning, err error)
}

// Kinds of error a source returns (marked with NotFound or Conflict) and
// a client's *Error matches (errors.Is) by its status.
var (
	ErrNotFound = errors.New("not found")                      // 404
	ErrConflict = errors.New("conflict with the node's state") // 409
)

// NotFound marks err as naming something that does not exist; its
// message stays err's.
func NotFound(err error) error { return &markedError{err: err, kind: ErrNotFound} }

// Conflict marks err as an operation the node cannot do in its state; its
// message stays err's.
func Conflict(err error) error { return &markedError{err: err, kind: ErrConflict} }

type markedError struct{ err, kind error }

func (e *markedError) Error() string   { return e.err.Error() }
func (e *markedError) Unwrap() []error { return []error{e.err, e.kind} }

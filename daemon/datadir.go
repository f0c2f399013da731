package daemon

import (
	"errors"
	"os"
	"path/filepath"

	"github.com/hearth-llm/hearth/adminapi"
	"github.com/hearth-llm/hearth/cluster"
	"github.com/hearth-llm/hearth/tlsca"
)

// DataDir is hearth up's data directory (--data-dir) and the one place
// that says where each thing Hearth keeps lives in it. Every command that
// reads the daemon's state (hearth engines, logs, cluster, kvstore,
// doctor) finds it through these paths too.
type DataDir string

// DefaultDataDir is the data directory without --data-dir, by the XDG
// base directory convention: $XDG_DATA_HOME/hearth, else
// ~/.local/share/hearth.
func DefaultDataDir(getenv func(string) string) DataDir {
	if d := getenv("XDG_DATA_HOME"); d != "" {
		return DataDir(filepath.Join(d, "hearth"))
	}
	if h := getenv("HOME"); h != "" {
		return DataDir(filepath.Join(h, ".local", "share", "hearth"))
	}
	return "hearth-data"
}

// Database is the SQLite database: API keys, console settings, stored
// Responses-API answers (api/store).
func (d DataDir) Database() string { return d.join("hearth.db") }

// TLS is the directory of the node's own CA for --tls auto (tlsca), and
// TLSCA its certificate, what clients trust.
func (d DataDir) TLS() string   { return d.join("tls") }
func (d DataDir) TLSCA() string { return filepath.Join(d.TLS(), tlsca.CAFile) }

// Cluster is the directory of the node's cluster identity: the cluster CA,
// its certificate and the join secret (package cluster).
func (d DataDir) Cluster() string { return d.join("cluster") }

// ClusterIdentity loads the node's cluster identity from Cluster, or,
// with none there, creates a cluster with this node as its first, named
// node ("": the host name); created says which.
func (d DataDir) ClusterIdentity(node string) (id *cluster.Identity, created bool, err error) {
	id, err = cluster.Load(d.Cluster())
	if !errors.Is(err, cluster.ErrNoCluster) {
		return id, false, err
	}
	if node == "" {
		node, _ = os.Hostname()
	}
	id, err = cluster.Create(d.Cluster(), node)
	return id, err == nil, err
}

// KVStore is the node's SSD KV store without --kv-store-dir.
func (d DataDir) KVStore() string { return d.join("kvstore") }

// LocalToken is the file the daemon writes its local token to at each
// start, and the command line on its machine reads (adminapi).
func (d DataDir) LocalToken() string { return d.join(adminapi.LocalTokenFile) }

// LocalAddr is the file the daemon writes, at each start beside its local
// token, the base URL a client on its machine reaches it at: the command
// line sends the token there alone.
func (d DataDir) LocalAddr() string { return d.join("local-addr") }

// HotPrefixes is the file of the prompt prefixes agent sessions shared
// (router/warm), which warm the engines of the next start.
func (d DataDir) HotPrefixes() string { return d.join("hot-prefixes") }

func (d DataDir) join(name string) string { return filepath.Join(string(d), name) }

// prepare creates the data directory, or narrows one that exists, to its
// owner alone: it holds the database of key digests and conversations,
// the CA's private key and the node's cluster identity.
func (d DataDir) prepare() error {
	if err := os.MkdirAll(string(d), 0o700); err != nil {
		return err
	}
	return os.Chmod(string(d), 0o700)
}

package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
)

// Revoked is one revoked node certificate.
type Revoked struct {
	Serial string `json:"serial"` // hex
	NodeID string `json:"node_id"`
}

// revocations is the cluster's revocation list: it only grows, every node
// holds all of it, and the union of two nodes' lists is the list.
type revocations struct {
	path string
	mu   sync.RWMutex
	bySN map[string]Revoked
}

func loadRevocations(dir string) (*revocations, error) {
	r := &revocations{path: filepath.Join(dir, revokedFile), bySN: map[string]Revoked{}}
	b, err := os.ReadFile(r.path)
	if errors.Is(err, os.ErrNotExist) {
		return r, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	var list []Revoked
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, fmt.Errorf("cluster: %s: %w", r.path, err)
	}
	for _, x := range list {
		r.bySN[x.Serial] = x
	}
	return r, nil
}

func (r *revocations) serialRevoked(sn string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	_, ok := r.bySN[sn]
	return ok
}

func (r *revocations) nodeRevoked(nodeID string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, x := range r.bySN {
		if x.NodeID == nodeID {
			return true
		}
	}
	return false
}

// merge adds what list has that r lacks, saves the list when it grew and
// returns the new entries.
func (r *revocations) merge(list []Revoked) []Revoked {
	r.mu.Lock()
	var added []Revoked
	for _, x := range list {
		if x.Serial == "" {
			continue
		}
		if _, ok := r.bySN[x.Serial]; !ok {
			r.bySN[x.Serial] = x
			added = append(added, x)
		}
	}
	var all []Revoked
	if len(added) > 0 {
		all = r.listLocked()
	}
	r.mu.Unlock()
	if len(added) > 0 && r.path != "" {
		b, _ := json.Marshal(all)
		_ = writeFile(filepath.Dir(r.path), filepath.Base(r.path), b)
	}
	return added
}

func (r *revocations) list() []Revoked {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.listLocked()
}

func (r *revocations) listLocked() []Revoked {
	out := make([]Revoked, 0, len(r.bySN))
	for _, x := range r.bySN {
		out = append(out, x)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Serial < out[j].Serial })
	return out
}

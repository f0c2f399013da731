package api

import (
	"sync"

	"github.com/zeebo/xxh3"
)

// memo remembers the results of a pure conversion of a request part that
// clients resend unchanged every turn, keyed by the part's bytes. Agents
// send the same tool definitions each time (Claude Code's are about 60 KB
// of JSON schema); checking and converting them was a millisecond of every
// request, a hash is a few microseconds. Results are shared between
// requests and must not be changed.
type memo[V any] struct {
	max int

	mu    sync.Mutex
	m     map[xxh3.Uint128]V
	order []xxh3.Uint128 // oldest first
}

func newMemo[V any](max int) *memo[V] {
	return &memo[V]{max: max, m: make(map[xxh3.Uint128]V, max)}
}

// get returns convert's result for raw, calling it only when raw was not
// seen lately. Errors are not remembered.
func (c *memo[V]) get(raw []byte, convert func() (V, error)) (V, error) {
	key := xxh3.Hash128(raw)
	c.mu.Lock()
	v, ok := c.m[key]
	c.mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := convert()
	if err != nil {
		return v, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[key]; !ok {
		c.m[key] = v
		c.order = append(c.order, key)
		if len(c.order) > c.max {
			delete(c.m, c.order[0])
			c.order = c.order[1:]
		}
	}
	return v, nil
}

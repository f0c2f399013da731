package api

import (
	"slices"
	"sync"
	"time"
)

// ClientSeen is a client that used the API without a key, and when it
// last did.
type ClientSeen struct {
	Client   string // as the traffic record names it (see clientKind)
	LastSeen time.Time
}

// openClients remembers the clients served while the API needed no key:
// the first key locks them out, and the console says so before it takes
// effect. It is bounded: the client seen longest ago is forgotten first.
type openClients struct {
	mu   sync.Mutex
	seen map[string]time.Time
}

const openClientsKept = 64

func (o *openClients) note(client string, at time.Time) {
	if client == "" {
		client = "other"
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.seen == nil {
		o.seen = make(map[string]time.Time)
	}
	if _, ok := o.seen[client]; !ok && len(o.seen) >= openClientsKept {
		var oldest string
		for c, t := range o.seen {
			if oldest == "" || t.Before(o.seen[oldest]) {
				oldest = c
			}
		}
		delete(o.seen, oldest)
	}
	o.seen[client] = at
}

func (o *openClients) since(t time.Time) []ClientSeen {
	o.mu.Lock()
	var out []ClientSeen
	for c, at := range o.seen {
		if !at.Before(t) {
			out = append(out, ClientSeen{Client: c, LastSeen: at})
		}
	}
	o.mu.Unlock()
	slices.SortFunc(out, func(a, b ClientSeen) int { return b.LastSeen.Compare(a.LastSeen) })
	return out
}

// ClientsWithoutKey returns the clients that used the API without a key at
// or after since, most recent first: those a first key would lock out.
func (g *Gateway) ClientsWithoutKey(since time.Time) []ClientSeen {
	return g.open.since(since)
}

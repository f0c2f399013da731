package kvbm

// TurnPriority is the priority of an agent's main turn (the router's
// PriorityTurn): a block a request of at least this priority covered gets
// the eviction's reprieve (Store.WeighPriorities). Side requests (-1) and
// background work such as a prefill in a tool pause (-2) are below it.
const TurnPriority = 0

// BlockPriorities is what eviction asks of whoever sees the requests (the
// router, through the daemon): which priority of request recently covered
// a block.
type BlockPriorities interface {
	// PriorityOf is the highest priority of the recent requests whose
	// prompts covered the block space names hash (its file name: the
	// engine's block hash), and false when none is known: a block no
	// routed prompt covered (an answer's own tokens, a background
	// prefill's) or one the record has forgotten. It is called with the
	// store's lock held, at most once per block per reprieve, so it must
	// be quick and must not call back into the store.
	PriorityOf(space string, hash uint64) (int, bool)
}

// WeighPriorities makes eviction weigh request priority through p (nil:
// plain segmented LRU again): a block that the record says a main turn's
// prompt covered (priority at least TurnPriority) gets one reprieve per
// stay, so that blocks only side requests or background work covered,
// and blocks no request the record remembers covered, leave before turn
// blocks of the same age. See evictLocked for the rule and its bound.
func (s *Store) WeighPriorities(p BlockPriorities) {
	s.mu.Lock()
	s.prio = p
	s.mu.Unlock()
}

// sparedByPriority reports whether eviction, having reached e, gives it
// its priority's reprieve; called with s.mu held.
func (s *Store) sparedByPriority(e *entry) bool {
	if s.prio == nil || e.spared {
		return false
	}
	p, ok := s.prio.PriorityOf(e.space.name, e.hash)
	return ok && p >= TurnPriority
}

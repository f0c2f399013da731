package kvbm

// The eviction policy is a segmented LRU. A block enters the probation
// segment; a second use (a Get, a repeated Put, or another process's use seen
// by Rescan as a newer mtime) moves it to the protected segment. Eviction
// takes probation's least recently used block first and the protected
// segment's only when probation is empty, so a one-off scan of many blocks
// churns probation and leaves the shared prefixes that were used twice. The
// protected segment is capped at protectedShare of the capacity: past it,
// its least recently used block goes back to probation's most recent end.
// Every operation is O(1).
//
// Priority (Store.WeighPriorities) adds one reprieve: a block a main turn's
// prompt covered goes back to its segment's most recent end the first time
// eviction reaches it (requeue), and leaves the next time; a use clears the
// reprieve, as it starts a new stay. See evictLocked for the rule and its
// bound.

const protectedShare = 0.8

type segment uint8

const (
	segProbation segment = iota
	segProtected
)

// entry is one block in the in-memory catalog.
type entry struct {
	hash  uint64
	space *Space
	size  int64  // payload bytes; the block counts HeaderSize more
	mtime int64  // the file's mtime in ns as this store last saw or set it
	seq   uint64 // the store's sequence number when it entered the catalog
	seg   segment
	// spared: eviction reached the block once and gave it its
	// priority's reprieve (evictLocked); cleared by a use.
	spared bool

	prev, next *entry
}

func (e *entry) bytes() int64 { return HeaderSize + e.size }

// lruList is a circular doubly linked list around a sentinel; next of the
// sentinel is the most recently used entry, prev the least.
type lruList struct {
	root  entry
	bytes int64
	n     int
}

func (l *lruList) init() { l.root.next, l.root.prev = &l.root, &l.root }

func (l *lruList) pushFront(e *entry) {
	e.prev, e.next = &l.root, l.root.next
	l.root.next.prev = e
	l.root.next = e
	l.bytes += e.bytes()
	l.n++
}

func (l *lruList) remove(e *entry) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
	l.bytes -= e.bytes()
	l.n--
}

// back is the least recently used entry, or nil.
func (l *lruList) back() *entry {
	if l.n == 0 {
		return nil
	}
	return l.root.prev
}

// slru is the two segments and the protected segment's cap in bytes.
type slru struct {
	probation, protected lruList
	protectedCap         int64
}

func (p *slru) init(capacity int64) {
	p.probation.init()
	p.protected.init()
	p.protectedCap = int64(float64(capacity) * protectedShare)
}

func (p *slru) list(s segment) *lruList {
	if s == segProtected {
		return &p.protected
	}
	return &p.probation
}

// add puts a new block at probation's most recent end.
func (p *slru) add(e *entry) {
	e.seg = segProbation
	p.probation.pushFront(e)
}

// use records a use of a block already in the catalog.
func (p *slru) use(e *entry) {
	p.list(e.seg).remove(e)
	e.spared = false
	e.seg = segProtected
	p.protected.pushFront(e)
	for p.protected.bytes > p.protectedCap && p.protected.n > 1 {
		old := p.protected.back()
		p.protected.remove(old)
		old.seg = segProbation
		p.probation.pushFront(old)
	}
}

func (p *slru) remove(e *entry) { p.list(e.seg).remove(e) }

// requeue moves a block to its segment's most recent end without counting
// a use: it stays in probation if it was there.
func (p *slru) requeue(e *entry) {
	l := p.list(e.seg)
	l.remove(e)
	l.pushFront(e)
}

// victim is the block to evict next, or nil when the catalog is empty.
func (p *slru) victim() *entry {
	if e := p.probation.back(); e != nil {
		return e
	}
	return p.protected.back()
}

// Package kvbm is the tiered KV block manager: host-RAM and SSD tiers beneath
// the engines' GPU caches, the catalog of where each block lives, and the
// eviction policy between tiers.
//
// It must not route requests or know about client protocols. It imports
// only kvevents, whose events tell it where engines hold blocks, and clock.
//
// # The node's SSD block store
//
// Store is the SSD tier (G3): one directory on local disk shared by every
// engine of the node and by Hearth's daemon, each process opening it with
// OpenStore. A block is immutable and named by its engine block hash, which
// is the same for the same prefix in every engine of one model, so whichever
// engine writes a block first, every engine can read it.
//
// Layout: <root>/<space>/<2 hex>/<16 hex hash>.kv, where a space is one
// model, engine kind and block size (a name such as "vllm-Qwen3-14B-b16",
// see SanitizeSpaceName) and the two hex digits are the hash's top byte.
// Each file is a 40-byte header (magic "HKVB", format version, flags, hash,
// payload length, xxh3-64 of the payload, xxh3-64 of the header) and then the
// payload; a Put without a payload writes a sparse file whose payload reads
// as zeros. Files whose names start with "." are temp files.
//
// Processes coordinate through atomic file-system operations only: a block is
// written to a temp file in its directory and renamed into place, so a reader
// sees all of it or nothing, even when its writer is killed; eviction and
// cleanup unlink; every operation takes a missing file (ENOENT) as "someone
// else deleted it". A Get verifies the header against the file's name and
// size and the payload against its checksum; a block that fails is deleted and
// reported as ErrCorrupt, never returned. A Get touches the file's mtime, and
// a Rescan of another process counts a changed mtime as a use.
//
// Each Store keeps an in-memory catalog, updated by its own operations,
// by blocks other processes announce (Written) and by Rescan, and keeps it
// under its capacity with a segmented LRU: a block enters on probation, a
// second use protects it (up to 80% of the capacity), and eviction takes
// probation's least recently used block first, so a one-off scan does not
// push out a prefix that agents keep sharing. Before a block is evicted
// its file is looked at: a newer mtime (another process's Get) counts as a
// use and spares it, a missing file lets it go uncounted. With a
// BlockPriorities (WeighPriorities; the daemon's asks the router, which
// alone sees requests), a block that a main turn's prompt covered
// (priority at least TurnPriority) is spared once per stay: the first time
// eviction reaches it, it goes back to its segment's most recent end,
// uncounted as a use. Blocks that only side requests or background work
// covered, or that no request the record remembers covered, leave when
// reached, so they go before turn blocks of the same age. The shift is
// bounded (one pass through the segment, at most maxSecondChances
// reprieves per eviction, shared with the mtime's second chances), not a
// strict order: a store full of turn blocks evicts them oldest first and
// stays within its capacity. SGLang's own pages (ForeignSpace) are held
// apart and are not weighed. The daemon holds
// the node's capacity (NodeStore): engines announce each block they write
// through their KV events, and write no more than a grant the daemon
// publishes for each of them (grant.go) before it has taken in what they
// announced, so the blocks written and not yet announced fit in the room
// the store keeps (an eighth of its capacity); the store evicts as fast as
// they write and
// walks the directory only to reconcile, once a minute, and turns OnEvict's
// reports into KV events for the router. An engine process keeps no
// catalog (EngineSpace): it asks the files whether a block is there, as
// the real engines' file tiers do. Stats and the prometheus.Collector
// (metrics named hearth_kvbm_store_*) show one process's view.
//
// # SGLang's pages at the root
//
// SGLang's HiCache file backend writes its pages at the store's root in its
// own layout (ForeignSpace): "<64 hex><suffix>.bin", each written to
// "<page>.bin.tmp.<pid>.<thread id>.<uuid hex>" and renamed onto its name
// (os.replace), so a page is whole or absent and a page's size says
// nothing about a torn write (two engines of one model with different page
// sizes write pages of different sizes under one suffix). A writer killed
// mid-write leaves its temp file, which SGLang never removes. The store
// counts temp files against its capacity with the pages (a page being
// written takes its disk space now) and deletes one whose mtime is older
// than staleTempAge, as it does its own: a write keeps its file's mtime
// fresh, so an old temp file is no live write's.
//
// The pid in the name is not used to tell a dead writer. SGLang runs in
// its own container, so the pid is in another pid namespace: the same
// number here may be another process (a dead writer's file kept for ever)
// or none (a live write deleted). Deleting a live write by age alone costs
// SGLang that one page (its rename fails and it gives up the write), never
// a wrong page.
package kvbm

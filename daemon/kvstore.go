package daemon

import (
	"cmp"
	"context"
	"slices"

	"github.com/hearth-llm/hearth/console"
	"github.com/hearth-llm/hearth/kvbm"
	"github.com/hearth-llm/hearth/router"
	hruntime "github.com/hearth-llm/hearth/runtime"
	"github.com/hearth-llm/hearth/runtime/sim"
	"github.com/hearth-llm/hearth/tokenizer"
)

// StoreSpace is the node-store space of a simulated engine's blocks:
// engines of one kind and model hash blocks alike and share it.
func StoreSpace(cfg sim.Config) string {
	return kvbm.SpaceName(string(cfg.Kind), cfg.Model, cmp.Or(cfg.BlockSize, tokenizer.DefaultBlockSize))
}

// nodeStoreSpace is the part of the node store an in-process engine uses.
func nodeStoreSpace(n *kvbm.NodeStore) func(hruntime.Spec) sim.NodeStore {
	return func(spec hruntime.Spec) sim.NodeStore { return sim.ByHash(n.Space(StoreSpace(sim.ConfigOf(spec)))) }
}

// kvStores is the console's view of the node store (console.KVStoreSource).
type kvStores struct{ n *kvbm.NodeStore }

func (s kvStores) KVStores(context.Context) ([]console.KVStore, error) {
	st := s.n.Stats()
	t := st.Total
	return []console.KVStore{{
		Node: s.n.Node, Dir: s.n.Dir,
		UsedBytes: t.Bytes, CapacityBytes: st.CapacityBytes, FreeDiskBytes: st.FreeDiskBytes,
		Blocks: int(t.Blocks), Hits: t.Hits, Misses: t.Misses,
		EvictedBlocks: t.EvictedBlocks, CorruptDropped: t.CorruptBlocks,
		ReadBytes: t.ReadBytes, WrittenBytes: t.WrittenBytes,
	}}, nil
}

// storeOwner is the node and model of engines whose blocks a space of the
// node store holds.
type storeOwner struct{ node, model string }

// nodeStoreOwners lists, by space, the node and model of the engines whose
// blocks it holds. SGLang's own page files (kvbm.ForeignSpace) belong to
// every SGLang engine of the node: hashes of another model's pages match
// nothing in its tables.
func nodeStoreOwners(specs []hruntime.Spec) map[string][]storeOwner {
	owners := map[string][]storeOwner{}
	for _, spec := range specs {
		if !spec.UsesKVStore() {
			continue
		}
		o := storeOwner{spec.GPU.Node, spec.Model}
		for _, space := range []string{StoreSpace(sim.ConfigOf(spec)), kvbm.ForeignSpace} {
			if space == kvbm.ForeignSpace && (spec.Simulated || !spec.Engine.Descriptor().ForeignPages) || slices.Contains(owners[space], o) {
				continue
			}
			owners[space] = append(owners[space], o)
		}
	}
	return owners
}

// nodeStoreEvictions tells the router which blocks left the node store, by
// the node and model of the engines whose space they were in.
func nodeStoreEvictions(rt *router.Router, specs []hruntime.Spec) func(space string, hashes []uint64) {
	owners := nodeStoreOwners(specs)
	return func(space string, hashes []uint64) {
		for _, o := range owners[space] {
			rt.RemoveNodeBlocks(o.node, o.model, hashes)
		}
	}
}

// nodeStoreBlockPriorities is how many blocks of recent prompts the router
// remembers the priority of when the node has a store
// (router.Config.BlockPriorities): 2^18 blocks, 4 MiB. A block the record
// forgot loses its reprieve, so it should span what the store holds: the
// largest default store (kvbm.MaxDefaultCapacity, 256 GiB) holds about
// 105,000 blocks of Qwen3-14B (160 KiB of KV a token, 16 tokens a block),
// and 2^18 slots keep most of that many (a direct-mapped table at 40% load
// keeps about 80% of its blocks) with room for prompts' blocks the store
// never got.
const nodeStoreBlockPriorities = 1 << 18

// nodeStorePriorities is what the node store's eviction asks the router
// (kvbm.BlockPriorities): which priority of request covered a block of a
// space, through the node and model of the engines that write it there.
type nodeStorePriorities struct {
	rt     *router.Router
	owners map[string][]storeOwner
}

func newNodeStorePriorities(rt *router.Router, specs []hruntime.Spec) nodeStorePriorities {
	return nodeStorePriorities{rt: rt, owners: nodeStoreOwners(specs)}
}

// PriorityOf is the highest priority any owner's router record knows for
// the block.
func (p nodeStorePriorities) PriorityOf(space string, hash uint64) (int, bool) {
	best, known := 0, false
	for _, o := range p.owners[space] {
		if pr, ok := p.rt.NodeBlockPriority(o.node, o.model, hash); ok && (!known || pr > best) {
			best, known = pr, true
		}
	}
	return best, known
}

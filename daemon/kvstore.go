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

// nodeStoreEvictions tells the router which blocks left the node store, by
// the node and model of the engines whose space they were in. SGLang's own
// page files (kvbm.ForeignSpace) belong to every SGLang engine of the
// node: hashes of another model's pages match nothing in its tables.
func nodeStoreEvictions(rt *router.Router, specs []hruntime.Spec) func(space string, hashes []uint64) {
	type owner struct{ node, model string }
	owners := map[string][]owner{}
	for _, spec := range specs {
		if !spec.UsesKVStore() {
			continue
		}
		o := owner{spec.GPU.Node, spec.Model}
		for _, space := range []string{StoreSpace(sim.ConfigOf(spec)), kvbm.ForeignSpace} {
			if space == kvbm.ForeignSpace && (spec.Simulated || !spec.Engine.Descriptor().ForeignPages) || slices.Contains(owners[space], o) {
				continue
			}
			owners[space] = append(owners[space], o)
		}
	}
	return func(space string, hashes []uint64) {
		for _, o := range owners[space] {
			rt.RemoveNodeBlocks(o.node, o.model, hashes)
		}
	}
}

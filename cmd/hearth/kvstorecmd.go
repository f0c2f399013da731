package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"text/tabwriter"

	"github.com/hearth-llm/hearth/daemon"
	"github.com/hearth-llm/hearth/kvbm"
	"github.com/hearth-llm/hearth/runtime/sim"
)

const kvstoreUsage = `kvstore [ls | rm MODEL] [--kv-store-dir DIR | --data-dir DIR]

Lists the node's SSD KV store by space (an engine kind, a model and a block
size), or removes every block of a model that is no longer served (the spaces of
MODEL, its whole name, as hearth up names them: vllm-qwen3-14b-fp8-b16).
Run it while no daemon uses the store, or the daemon's next rescan finds
the blocks gone and tells the router.`

func runKVStore(ctx context.Context, env *environment, args []string) error {
	verb, model := "ls", ""
	switch {
	case len(args) > 0 && args[0] == "ls":
		args = args[1:]
	case len(args) > 1 && args[0] == "rm" && !strings.HasPrefix(args[1], "-"):
		verb, model, args = "rm", args[1], args[2:]
	case len(args) > 0 && !strings.HasPrefix(args[0], "-"):
		return fmt.Errorf("%w: want kvstore ls or kvstore rm MODEL", errUsage)
	}
	fs := newFlagSet(env, "kvstore", kvstoreUsage)
	dir := fs.String("kv-store-dir", "", "the node's SSD KV store (default: kvstore in the data directory)")
	dataDir := fs.String("data-dir", "", "Hearth's data directory (default $XDG_DATA_HOME/hearth or ~/.local/share/hearth)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *dir == "" {
		data := daemon.DataDir(*dataDir)
		if data == "" {
			data = daemon.DefaultDataDir(env.getenv)
		}
		*dir = data.KVStore()
	}
	st, err := kvbm.OpenStore(kvbm.StoreConfig{Dir: *dir, CapacityBytes: kvbm.EngineStoreCapacity})
	if err != nil {
		return fmt.Errorf("kvstore: %w", err)
	}
	defer st.Close()
	stats := st.Stats()
	if verb == "ls" {
		tw := tabwriter.NewWriter(env.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "SPACE\tBLOCKS\tBYTES")
		for _, sp := range stats.Spaces {
			fmt.Fprintf(tw, "%s\t%d\t%d\n", sp.Name, sp.Blocks, sp.Bytes)
		}
		fmt.Fprintf(tw, "total\t%d\t%d\n", stats.Total.Blocks, stats.Total.Bytes)
		return tw.Flush()
	}
	removed := 0
	for _, sp := range stats.Spaces {
		if kvbm.SpaceOfModel(sp.Name, model) {
			if err := st.RemoveSpace(sp.Name); err != nil {
				return fmt.Errorf("kvstore: %w", err)
			}
			fmt.Fprintf(env.stdout, "removed %s: %d blocks, %d bytes\n", sp.Name, sp.Blocks, sp.Bytes)
			removed++
		}
	}
	if removed == 0 {
		return fmt.Errorf("kvstore: no space of model %q in %s", model, *dir)
	}
	return nil
}

// openEngineStore opens the node store in an engine process and returns
// its space for the engine's blocks: engines of one flavour and model hash
// blocks alike and share it. writer names the engine's write grant.
func openEngineStore(dir string, cfg sim.Config, writer string, log *slog.Logger) (*kvbm.EngineSpace, error) {
	return kvbm.OpenEngineSpace(dir, daemon.StoreSpace(cfg), writer, log)
}

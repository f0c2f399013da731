package main

import (
	"context"
	"fmt"
	"os"

	"github.com/hearth-llm/hearth/runtime/docker"
	"github.com/hearth-llm/hearth/runtime/sim"
)

// runSimImage is `hearth sim-image build`.
func runSimImage(ctx context.Context, env *environment, args []string) error {
	if len(args) == 0 || args[0] != "build" {
		return fmt.Errorf("%w: sim-image build [--flavor vllm|sglang] [--tag IMAGE] [--binary PATH]", errUsage)
	}
	fs := newFlagSet(env, "sim-image build", "sim-image build [--flavor vllm|sglang] [--tag IMAGE] [--binary PATH]")
	flavor := fs.String("flavor", "vllm", "which engine the image passes for: vllm or sglang")
	tag := fs.String("tag", "", "image name (default hearth/sim-FLAVOR:VERSION, what hearth up --sim --engine-runtime docker runs)")
	binary := fs.String("binary", "", "hearth binary to put in the image, with the libraries it links (default: this one)")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	kind, err := sim.ParseKind(*flavor)
	if err != nil || *flavor == "" {
		return fmt.Errorf("%w: --flavor: want vllm or sglang, got %q", errUsage, *flavor)
	}
	if *tag == "" {
		*tag = docker.SimImage(kind, version)
	}
	if *binary == "" {
		if *binary, err = os.Executable(); err != nil {
			return fmt.Errorf("sim-image: %w", err)
		}
	}
	cli, err := docker.Connect(ctx)
	if err != nil {
		return fmt.Errorf("sim-image: %w", err)
	}
	defer cli.Close()
	if err := docker.BuildSimImage(ctx, cli, *binary, kind, *tag, env.stdout); err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "built %s (%s flavour)\n", *tag, kind)
	return nil
}

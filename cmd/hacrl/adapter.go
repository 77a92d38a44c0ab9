package main

// LoRA adapters on the command line: --adapter and --base of the commands
// that run one agent alone (eval, generate, score), and hacrl merge.

import (
	"fmt"

	"github.com/hacrl/hacrl/backend"
	"github.com/hacrl/hacrl/train"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// adapterHelp documents the adapter flags for the commands' long help.
const adapterHelp = `A LoRA agent is a base model plus an adapter directory in PEFT's layout
(adapter_config.json, adapter_model.safetensors; a run's final agents of a
LoRA agent are such directories): give the base as CHECKPOINT and the
adapter with --adapter DIR, or the adapter directory as CHECKPOINT, whose
adapter_config.json names its base (base_model_name_or_path), or --base DIR
does.`

// adapterFlags are --adapter and --base.
type adapterFlags struct{ adapter, base string }

func (a *adapterFlags) register(f *pflag.FlagSet) {
	f.StringVar(&a.adapter, "adapter", "", "LoRA adapter directory to load onto CHECKPOINT (PEFT's layout)")
	f.StringVar(&a.base, "base", "", "base model of an adapter given as CHECKPOINT (default: its base_model_name_or_path)")
}

// load reads the agent of dir (a model, or an adapter) with the adapter
// flags applied.
func (a *adapterFlags) load(dir string, c train.TemplateChoice) (*train.Saved, error) {
	switch {
	case a.adapter != "" && a.base != "":
		return nil, usage("give --adapter DIR with a base CHECKPOINT, or --base DIR with an adapter CHECKPOINT, not both")
	case a.adapter != "":
		return train.LoadSavedAdapter(dir, a.adapter, c)
	case a.base != "":
		return train.LoadSavedAdapter(a.base, dir, c)
	}
	return train.LoadSaved(dir, c)
}

func mergeCmd() *cobra.Command {
	var base, adapter, out, dtype, backendCfg string
	cmd := &cobra.Command{
		Use:   "merge --adapter DIR --out DIR [--base DIR]",
		Short: "Merge a LoRA adapter into its base: a full Hugging Face checkpoint",
		Long: `Merge the LoRA adapter in --adapter (PEFT's layout, as a run saves a LoRA
agent's final adapters) into its base model, W += (alpha/r)·B·A for every
adapted layer, and write the result to --out as a plain Hugging Face
checkpoint (config.json, model.safetensors, generation_config.json) with
the tokenizer and agent.json of the adapter directory (or of the base), so
that hacrl eval, generate and score, a train config's checkpoint and
transformers load it with no adapter. The base is --base, or the adapter's
base_model_name_or_path. --dtype is the weights' dtype (float32, bfloat16
or float16; default: the base's). --out must not exist.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case adapter == "":
				return usage("--adapter DIR is required")
			case out == "":
				return usage("--out DIR is required")
			case dtype != "" && dtype != "float32" && dtype != "bfloat16" && dtype != "float16":
				return usage("--dtype must be float32, bfloat16 or float16, got %q", dtype)
			}
			b, err := backend.New(backend.Choose(backendCfg))
			if err != nil {
				return err
			}
			if err := train.MergeAdapter(b, base, adapter, out, dtype); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "merged %s into its base: %s\n", adapter, out)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&adapter, "adapter", "", "LoRA adapter directory")
	f.StringVar(&base, "base", "", "base model directory (default: the adapter's base_model_name_or_path)")
	f.StringVar(&out, "out", "", "directory to write the merged checkpoint to (must not exist)")
	f.StringVar(&dtype, "dtype", "", "dtype of the merged weights: float32, bfloat16 or float16 (default: the base's)")
	f.StringVar(&backendCfg, "backend", "", "GoMLX backend config")
	return cmd
}

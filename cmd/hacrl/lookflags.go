package main

// The template flags of the commands that look at one agent alone
// (generate, score, prompt, serve), and their helpers.

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/gomlx/compute"
	"github.com/hacrl/hacrl/backend"
	"github.com/hacrl/hacrl/tokenizer"
	"github.com/hacrl/hacrl/train"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// templateHelp documents which template a checkpoint is prompted with.
const templateHelp = `The template is the one the checkpoint's agent.json names. A checkpoint
with a chat template and no agent.json (a downloaded Hugging Face model:
chat_template in its tokenizer_config.json, or a chat_template.jinja) is
prompted with its template (kind hf), as transformers' apply_chat_template
and vLLM's chat endpoint prompt it; plain on request (--template plain).
Without agent.json or a chat template the template is plain.`

// varsHelp documents the default template and --var for the commands' long
// help.
const varsHelp = templateHelp + `

--var NAME=VALUE sets a variable of an hf chat template (Qwen3's
enable_thinking=false), over those saved in agent.json; repeat it for more.
VALUE is read as JSON when it is valid JSON (false, 3, "x", [1,2]) and as a
string otherwise (so enable_thinking=false is the boolean false, and
name=Ada the string "Ada").`

// templateFlags are --template, --var and (for generate and score)
// --system.
type templateFlags struct {
	kind   string
	vars   []string
	system string
	// adapter holds --adapter and --base where the command registers
	// them (generate, score); LoadSaved takes an adapter directory anyway.
	adapter adapterFlags
}

func (t *templateFlags) register(f *pflag.FlagSet, withSystem bool) {
	f.StringVar(&t.kind, "template", "", "replace the checkpoint's prompt template (plain, chat or hf; default: its agent.json's, else hf when it has a chat template, else plain)")
	f.StringArrayVar(&t.vars, "var", nil, "hf template variable NAME=VALUE (VALUE as JSON when valid JSON, else a string); repeatable")
	if withSystem {
		f.StringVar(&t.system, "system", "", "replace the template's system text")
	}
}

// check reports a bad --template or --var as a usage error.
func (t *templateFlags) check() error {
	if t.kind != "" && t.kind != tokenizer.KindPlain && t.kind != tokenizer.KindChat && t.kind != tokenizer.KindHF {
		return usage("--template must be plain, chat or hf, got %q", t.kind)
	}
	_, err := parseVars(t.vars)
	return err
}

// parseVars reads --var NAME=VALUE flags: VALUE is JSON when it parses as
// JSON, else the string itself.
func parseVars(flags []string) (map[string]any, error) {
	if len(flags) == 0 {
		return nil, nil
	}
	vars := make(map[string]any, len(flags))
	for _, kv := range flags {
		name, value, ok := strings.Cut(kv, "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			return nil, usage("--var %q: want NAME=VALUE", kv)
		}
		if tokenizer.ReservedVar(name) {
			return nil, usage("--var %s: the renderer sets %s itself", name, name)
		}
		var v any
		if err := json.Unmarshal([]byte(value), &v); err != nil {
			v = value
		}
		vars[name] = v
	}
	return vars, nil
}

// load reads checkpoint dir's tokenizer and template with the flags
// applied. --var for a template that is not hf is a usage error.
func (t *templateFlags) load(cmd *cobra.Command, dir string) (*train.Saved, error) {
	vars, err := parseVars(t.vars)
	if err != nil {
		return nil, err
	}
	c := train.TemplateChoice{Kind: t.kind, Vars: vars}
	if cmd.Flags().Lookup("system") != nil && cmd.Flags().Changed("system") {
		c.System = &t.system
	}
	if len(vars) > 0 {
		meta, err := train.ReadMeta(dir)
		if err != nil {
			return nil, err
		}
		if kind := firstNonEmpty(t.kind, meta.Template.Kind); kind != tokenizer.KindHF {
			return nil, usage("--var applies to an hf template; the template here is %s", kind)
		}
	}
	s, err := t.adapter.load(dir, c)
	if err != nil {
		return nil, err
	}
	if t.kind != "" && s.HasMeta && t.kind != s.Meta.Template.Kind {
		fmt.Fprintf(cmd.ErrOrStderr(), "hacrl %s: --template %s replaces the checkpoint's %s\n", cmd.Name(), t.kind, s.Meta.Template.Kind)
	}
	return s, nil
}

// loadAgent is load, then the agent on a backend of backendCfg (the
// --backend flag): what generate, score and serve start from.
func (t *templateFlags) loadAgent(cmd *cobra.Command, dir, backendCfg string) (*train.Saved, *train.Agent, compute.Backend, error) {
	s, err := t.load(cmd, dir)
	if err != nil {
		return nil, nil, nil, err
	}
	b, err := backend.New(backend.Choose(backendCfg))
	if err != nil {
		return nil, nil, nil, err
	}
	a, err := s.Agent(b)
	if err != nil {
		return nil, nil, nil, err
	}
	return s, a, b, nil
}

// templateSource says where a loaded template's kind came from.
func (t *templateFlags) source(s *train.Saved) string {
	switch {
	case t.kind != "":
		return "--template"
	case s.HasMeta:
		return s.Dir + string(os.PathSeparator) + "agent.json"
	case s.Template.Kind == tokenizer.KindHF:
		return "default (no agent.json; the checkpoint's chat template)"
	}
	return "default (no agent.json, no chat template)"
}

// firstNonEmpty returns the first non-empty string.
func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// openInput opens path, or standard input for "-".
func openInput(cmd *cobra.Command, path string) (io.ReadCloser, error) {
	if path == "-" {
		return io.NopCloser(cmd.InOrStdin()), nil
	}
	return os.Open(path)
}

// parseMessages reads a conversation: a JSON list of {"role", "content"}
// with string values. Errors name the message.
func parseMessages(data []byte) ([]tokenizer.Message, error) {
	var raw []map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf(`want a JSON list of {"role": ..., "content": ...}: %v`, err)
	}
	if len(raw) == 0 {
		return nil, fmt.Errorf("no messages")
	}
	msgs := make([]tokenizer.Message, len(raw))
	for i, m := range raw {
		for _, f := range []struct {
			key string
			dst *string
		}{{"role", &msgs[i].Role}, {"content", &msgs[i].Content}} {
			v, ok := m[f.key]
			if !ok {
				return nil, fmt.Errorf("message %d: no %q", i, f.key)
			}
			if err := json.Unmarshal(v, f.dst); err != nil {
				return nil, fmt.Errorf("message %d: %q must be a string, got %s", i, f.key, v)
			}
		}
	}
	return msgs, nil
}

package main

import (
	"fmt"
	"github.com/hacrl/hacrl/internal/flip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hacrl/hacrl/internal/checksum"
	"github.com/hacrl/hacrl/model"
)

// The commands that load a saved agent refuse one whose files differ from
// the checksums.json its run wrote, naming the file and the tensor: a run
// of `hacrl train` (one step, the shipped gpt-char agent, full weights, and
// the shipped llama-bpe with LoRA adapters) writes the final agents; a
// tensor of gpt-char's weights, of llama-bpe's adapter and of llama-bpe's
// base (the shipped checkpoint, which has no manifest, so it loads
// unchecked) are changed in turn. The intact agents evaluate.
func TestCommandsCheckChecksums(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	cfg := fmt.Sprintf(`
seed: 3
out: %s
steps: 1
method: {name: grpo}
task: {name: arith, digits: 1}
batch: {prompts_per_step: 2, responses_per_prompt: 2, mini_batch: 4}
agents:
  - name: gpt
    checkpoint: %s
    optimizer: {lr: 0.001}
    sampling: {max_new_tokens: 12}
  - name: bpe
    checkpoint: %s
    template: {kind: chat}
    lora: {rank: 2, target_modules: [q_proj, v_proj]}
    optimizer: {lr: 0.001}
    sampling: {max_new_tokens: 12}
checkpoint: {every: 0}
`, out, must(filepath.Abs(lookAgents[0])), must(filepath.Abs(lookAgents[1])))
	cfgPath := filepath.Join(dir, "run.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := runHacrl(t, "train", cfgPath); code != 0 {
		t.Fatalf("train: exit status %d\n%s", code, stderr)
	}
	gpt, bpe := filepath.Join(out, "final", "gpt"), filepath.Join(out, "final", "bpe")
	for _, d := range []string{gpt, bpe} {
		if found, err := checksum.Verify(d); !found || err != nil {
			t.Fatalf("final agent %s: manifest found %v, %v", d, found, err)
		}
	}
	evalArgs := []string{"--set", "test", "--problems", "2", "--max-new-tokens", "8"}
	commands := map[string]func(agent string) (string, int){
		"eval": func(agent string) (string, int) {
			_, stderr, code := runEval(t, append([]string{agent}, evalArgs...)...)
			return stderr, code
		},
		"generate": func(agent string) (string, int) {
			_, stderr, code := runHacrl(t, "generate", agent, "--max-new-tokens", "4", "12+7=")
			return stderr, code
		},
	}
	for _, c := range []struct {
		name, agent, file string
		checked           bool
	}{
		{"weights", gpt, filepath.Join(gpt, model.WeightsFile), true},
		{"adapter", bpe, filepath.Join(bpe, model.AdapterWeightsFile), true},
		{"base without manifest", bpe, filepath.Join(lookAgents[1], model.WeightsFile), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !c.checked {
				// The shipped base has no manifest: it loads as before.
				if _, err := os.Stat(filepath.Join(lookAgents[1], checksum.FileName)); err == nil {
					t.Fatalf("%s has a manifest", lookAgents[1])
				}
				if _, stderr, code := runEval(t, append([]string{c.agent}, evalArgs...)...); code != 0 {
					t.Errorf("eval of %s: exit status %d\n%s", c.agent, code, stderr)
				}
				return
			}
			orig := must(os.ReadFile(c.file))
			defer os.WriteFile(c.file, orig, 0o644)
			tensor := flip.Tensor(t, c.file)
			for name, run := range commands {
				stderr, code := run(c.agent)
				for _, w := range []string{c.file + ": ", `tensor "` + tensor + `"`, filepath.Join(c.agent, checksum.FileName)} {
					if code != 1 || !strings.Contains(stderr, w) {
						t.Errorf("%s of a changed %s: exit status %d, stderr lacks %q:\n%s", name, c.file, code, w, stderr)
					}
				}
			}
			if err := os.WriteFile(c.file, orig, 0o644); err != nil {
				t.Fatal(err)
			}
			if _, stderr, code := runEval(t, append([]string{c.agent}, evalArgs...)...); code != 0 {
				t.Errorf("eval of the restored %s: exit status %d\n%s", c.agent, code, stderr)
			}
		})
	}
}

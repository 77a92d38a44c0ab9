package train

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/hacrl/hacrl/internal/flip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/internal/checksum"
	"github.com/hacrl/hacrl/metrics"
	"github.com/hacrl/hacrl/model"
)

// checksumConfig is tinyConfig's three agents, llama-bpe with LoRA
// adapters on a new model, so that a checkpoint holds every kind of file:
// weights, optimizer state, adapters, tokenizer files, config.json,
// agent.json and state.json; hacpo's KL term adds reference models.
func checksumConfig(t *testing.T) *config.Config {
	cfg := tinyConfig(t, t.TempDir(), "hacpo", 4)
	cfg.Agents[2].LoRA = &config.LoRA{Rank: 2, Alpha: 4, TargetModules: config.Modules{"q_proj", "v_proj"}}
	return cfg
}

// bumpDigit changes, in a JSON file, the first digit after the first
// occurrence of key at or after line (0-based), to the next digit: a
// change that leaves valid JSON, which only the checksums can see.
func bumpDigit(t testing.TB, path, key string, line int) {
	t.Helper()
	data := must(os.ReadFile(path))
	start := 0
	for range line {
		start += bytes.IndexByte(data[start:], '\n') + 1
	}
	i := bytes.Index(data[start:], []byte(key))
	if i < 0 {
		t.Fatalf("%s has no %s after line %d", path, key, line+1)
	}
	i += start + len(key)
	for data[i] < '0' || data[i] > '9' {
		i++
	}
	data[i] = '0' + (data[i]-'0'+1)%10
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// swapTokens exchanges the ids of two ordinary tokens of a tokenizer.json:
// still a valid tokenizer, which only the checksums show is not the one
// saved.
func swapTokens(t testing.TB, path string) {
	t.Helper()
	var tok map[string]any
	if err := json.Unmarshal(must(os.ReadFile(path)), &tok); err != nil {
		t.Fatal(err)
	}
	vocab := tok["model"].(map[string]any)["vocab"].(map[string]any)
	byID := map[float64]string{}
	for s, id := range vocab {
		byID[id.(float64)] = s
	}
	a, b := byID[float64(len(vocab)-1)], byID[float64(len(vocab)-2)]
	vocab[a], vocab[b] = vocab[b], vocab[a]
	if err := os.WriteFile(path, must(json.Marshal(tok)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// finalWeights is what the final agents' manifests say of their weights,
// optimizer state and adapters: equal manifests, equal files, bit for bit.
func finalWeights(t *testing.T, out string) map[string]checksum.File {
	t.Helper()
	got := map[string]checksum.File{}
	for _, a := range []string{"gpt-char", "llama-char", "llama-bpe"} {
		var m checksum.Manifest
		if err := json.Unmarshal(must(os.ReadFile(filepath.Join(out, "final", a, checksum.FileName))), &m); err != nil {
			t.Fatal(err)
		}
		for name, f := range m.Files {
			if strings.HasSuffix(name, ".safetensors") {
				got[a+"/"+name] = f
			}
		}
	}
	if len(got) != 6 {
		t.Fatalf("final agents have %d safetensors files, want 6", len(got))
	}
	return got
}

// TestChecksumsFindDamage: in a run of 4 steps interrupted after step 3,
// a byte changed in any file of the latest checkpoint — a tensor of the
// weights, of the optimizer state or of a LoRA adapter, the adapter's
// config, the tokenizer files, config.json, state.json — makes --resume
// set the checkpoint aside, naming the file (and tensor), and continue from
// the previous one to the same metrics and final weights as an
// uninterrupted run; an intact checkpoint resumes bit for bit. A damaged
// reference model or a changed earlier record of metrics.jsonl (valid
// JSON) is refused, naming the file and tensor, or the line, with nothing
// written.
func TestChecksumsFindDamage(t *testing.T) {
	cfg := checksumConfig(t)
	full := *cfg
	full.Out = filepath.Join(t.TempDir(), "full")
	trainWith(t, &full, Options{})
	want := deterministic(must(metrics.ReadFile(filepath.Join(full.Out, metrics.FileName))))
	wantWeights := finalWeights(t, full.Out)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := &recorder{onStep: func(step int) {
		if step == 3 {
			cancel()
		}
	}}
	run, err := New(ctx, cfg, Options{Observer: rec})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Train(ctx); err != ErrInterrupted {
		t.Fatalf("interrupted run: %v, want ErrInterrupted\n%s", err, rec.text())
	}
	agentFile := func(agent, file string) func(out string) string {
		return func(out string) string { return filepath.Join(checkpointDir(out, 3), "agents", agent, file) }
	}
	cases := []struct {
		name   string
		file   func(out string) string
		damage func(t testing.TB, path string) string // returns the tensor changed, if any
		refuse string                                 // "": set aside and fall back; else in the error
	}{
		{"intact", nil, nil, ""},
		{"weights tensor", agentFile("gpt-char", model.WeightsFile), flip.Tensor, ""},
		{"optimizer tensor", agentFile("llama-char", model.OptimizerFile), flip.Tensor, ""},
		{"adapter tensor", agentFile("llama-bpe", model.AdapterWeightsFile), flip.Tensor, ""},
		{"adapter config", agentFile("llama-bpe", model.AdapterConfigFile), func(t testing.TB, p string) string {
			bumpDigit(t, p, `"lora_alpha"`, 0)
			return ""
		}, ""},
		{"tokenizer.json", agentFile("llama-bpe", "tokenizer.json"), func(t testing.TB, p string) string {
			flip.Bytes(t, p, -1)
			return ""
		}, ""},
		{"tokenizer_config.json", agentFile("gpt-char", "tokenizer_config.json"), func(t testing.TB, p string) string {
			flip.Bytes(t, p, 20)
			return ""
		}, ""},
		{"config.json", agentFile("llama-char", model.ConfigFile), func(t testing.TB, p string) string {
			bumpDigit(t, p, `"rms_norm_eps"`, 0)
			return ""
		}, ""},
		{"state.json", func(out string) string { return filepath.Join(checkpointDir(out, 3), "state.json") }, func(t testing.TB, p string) string {
			bumpDigit(t, p, `"time/eval"`, 0)
			return ""
		}, ""},
		{"reference model", func(out string) string { return filepath.Join(out, "reference", "gpt-char", model.WeightsFile) }, flip.Tensor,
			"resume: reference model of gpt-char: "},
		{"earlier metrics record", func(out string) string { return filepath.Join(out, metrics.FileName) }, func(t testing.TB, p string) string {
			bumpDigit(t, p, `"accuracy/train"`, 4)
			return ""
		}, "line 5 differs from the record the checkpoint covers"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			copyTree(t, cfg.Out, out)
			run := *cfg
			run.Out = out
			if c.file == nil { // killed before the checkpoint of step 3: resumes from step 2
				if err := os.RemoveAll(checkpointDir(out, 3)); err != nil {
					t.Fatal(err)
				}
				_, rec := trainWith(t, &run, Options{Resume: true})
				if w := "resumed from " + checkpointDir(out, 2) + " (step 2)"; !strings.Contains(rec.text(), w) || strings.Contains(rec.text(), "damaged") {
					t.Errorf("log: want %q and nothing damaged:\n%s", w, rec.text())
				}
			} else {
				path := c.file(out)
				tensor := c.damage(t, path)
				names := []string{path + ": "}
				if tensor != "" {
					names = append(names, `tensor "`+tensor+`"`)
				}
				if c.refuse != "" {
					before := digest(t, out)
					rec := &recorder{}
					_, err := New(context.Background(), &run, Options{Resume: true, Observer: rec})
					for _, w := range append(names, c.refuse) {
						if err == nil || !strings.Contains(err.Error(), w) {
							t.Errorf("resume: error %v lacks %q\nlog:\n%s", err, w, rec.text())
						}
					}
					sameTree(t, out, before)
					return
				}
				_, rec := trainWith(t, &run, Options{Resume: true})
				latest := checkpointDir(out, 3)
				for _, w := range append(names, "checkpoint "+latest+" is damaged", "falling back to "+checkpointDir(out, 2),
					"resumed from "+checkpointDir(out, 2)+" (step 2)", "moved the damaged checkpoint "+latest) {
					if !strings.Contains(rec.text(), w) {
						t.Errorf("log lacks %q:\n%s", w, rec.text())
					}
				}
				if _, err := os.Stat(filepath.Join(out, "checkpoints", "damaged-step-00000003")); err != nil {
					t.Errorf("the damaged checkpoint was not set aside: %v", err)
				}
			}
			if got := deterministic(must(metrics.ReadFile(filepath.Join(out, metrics.FileName)))); !reflect.DeepEqual(got, want) {
				t.Errorf("metrics after the resume differ from the uninterrupted run's")
			}
			if got := finalWeights(t, out); !reflect.DeepEqual(got, wantWeights) {
				t.Errorf("final weights after the resume differ from the uninterrupted run's:\n%v\nwant\n%v", got, wantWeights)
			}
			for _, ck := range must(listCheckpoints(out)) {
				if found, err := checksum.Verify(ck); !found || err != nil {
					t.Errorf("checkpoint %s after the resume: manifest found %v, %v", ck, found, err)
				}
			}
		})
	}
}

// TestLoadSavedChecksChecksums: loading a final agent (LoadSaved, as hacrl
// eval, generate, score and serve do) or merging its adapter refuses a
// changed weights tensor, adapter tensor, tensor of a LoRA agent's base or
// tokenizer file, naming the file and the tensor; a directory without
// checksums.json (a Hugging Face download) loads unchecked.
func TestLoadSavedChecksChecksums(t *testing.T) {
	cfg := checksumConfig(t)
	cfg.Steps = 1
	cfg.Eval.Sets = nil
	trainWith(t, cfg, Options{})
	final := func(a string) string { return filepath.Join(cfg.Out, "final", a) }
	for _, c := range []struct {
		name, agent, file string
		tensor            bool
	}{
		{"weights", "gpt-char", filepath.Join(final("gpt-char"), model.WeightsFile), true},
		{"optimizer", "llama-char", filepath.Join(final("llama-char"), model.OptimizerFile), true},
		{"adapter", "llama-bpe", filepath.Join(final("llama-bpe"), model.AdapterWeightsFile), true},
		{"base of an adapter", "llama-bpe", filepath.Join(cfg.Out, "base", "llama-bpe", model.WeightsFile), true},
		{"tokenizer", "llama-char", filepath.Join(final("llama-char"), "tokenizer.json"), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			orig := must(os.ReadFile(c.file))
			defer os.WriteFile(c.file, orig, 0o644)
			wants := []string{c.file + ": "}
			if c.tensor {
				wants = append(wants, `tensor "`+flip.Tensor(t, c.file)+`"`)
			} else {
				swapTokens(t, c.file)
			}
			_, err := LoadSaved(final(c.agent), TemplateChoice{})
			for _, w := range wants {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("LoadSaved: error %v lacks %q", err, w)
				}
			}
			if c.agent == "llama-bpe" {
				err := MergeAdapter(nil, "", final(c.agent), filepath.Join(t.TempDir(), "merged"), "")
				for _, w := range wants {
					if err == nil || !strings.Contains(err.Error(), w) {
						t.Errorf("MergeAdapter: error %v lacks %q", err, w)
					}
				}
			}
		})
	}
	// Without its manifest, a changed file is not seen (a Hugging Face
	// download has none): the directory loads as before.
	p := filepath.Join(final("gpt-char"), "agent.json")
	bumpDigit(t, p, `"max_new_tokens"`, 0)
	if _, err := LoadSaved(final("gpt-char"), TemplateChoice{}); err == nil {
		t.Errorf("LoadSaved of a changed agent.json succeeded")
	}
	if err := os.Remove(filepath.Join(final("gpt-char"), checksum.FileName)); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSaved(final("gpt-char"), TemplateChoice{}); err != nil {
		t.Errorf("LoadSaved without checksums.json: %v", err)
	}
}

// TestResumeRepairsFinal: --resume of a finished run writes again, from its
// last checkpoint, a final agent whose files differ from its checksums.json,
// saying so, and the agent is the one the run wrote, bit for bit.
func TestResumeRepairsFinal(t *testing.T) {
	cfg := checksumConfig(t)
	cfg.Steps = 1
	trainWith(t, cfg, Options{})
	dst := filepath.Join(cfg.Out, "final", "gpt-char")
	want := digest(t, dst)
	tensor := flip.Tensor(t, filepath.Join(dst, model.WeightsFile))
	sum, rec := trainWith(t, cfg, Options{Resume: true})
	for _, w := range []string{"resume: final agent " + dst + " is damaged, writing it again from the last checkpoint", `tensor "` + tensor + `"`} {
		if !strings.Contains(rec.text(), w) {
			t.Errorf("log lacks %q:\n%s", w, rec.text())
		}
	}
	if !sum.AlreadyComplete {
		t.Errorf("the finished run trained again: %+v", sum)
	}
	sameTree(t, dst, want)
}

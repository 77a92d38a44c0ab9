package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hacrl/hacrl/backend"
	"github.com/hacrl/hacrl/internal/hfstandin"
	"github.com/hacrl/hacrl/internal/npmtest"
	"github.com/hacrl/hacrl/internal/pyenv"
	"github.com/hacrl/hacrl/model"
	"github.com/hacrl/hacrl/safetensors"
)

// peftTol bounds |hacrl − PEFT| of a log-prob, both in float32.
const peftTol = 1e-4

// peftSeq is a sequence as testdata/peft_oracle.py reads it.
type peftSeq struct {
	Prompt   []int `json:"prompt"`
	Response []int `json:"response"`
}

// peftResult is the oracle's answer to one job.
type peftResult struct {
	LogProbs [][]float64 `json:"logprobs"`
	Best     [][]float64 `json:"best"`
}

// peftJobs runs testdata/peft_oracle.py on jobs.
func peftJobs(t *testing.T, jobs []map[string]any) []peftResult {
	t.Helper()
	var res struct{ Results []peftResult }
	pyenv.Run(t, "testdata/peft_oracle.py", map[string]any{"jobs": jobs}, &res)
	if len(res.Results) != len(jobs) {
		t.Fatalf("peft_oracle.py: %d results for %d jobs", len(res.Results), len(jobs))
	}
	return res.Results
}

// peftBase is a base model of the check: a directory in a published layout.
type peftBase struct {
	name, dir string
	seqs      []peftSeq // token ids inside the vocabulary, a high one among them
}

// scoreFile writes seqs as hacrl score's JSONL input.
func scoreFile(t *testing.T, dir, name string, seqs []peftSeq) string {
	t.Helper()
	var b strings.Builder
	for _, s := range seqs {
		fmt.Fprintf(&b, `{"prompt_ids": %s, "response_ids": %s}`+"\n", intsJSON(s.Prompt), intsJSON(s.Response))
	}
	path := filepath.Join(dir, name+".jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func intsJSON(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return "[" + strings.Join(s, ", ") + "]"
}

// hacrlScore runs hacrl score with args on the sequences of in and returns
// the log-probs it prints.
func hacrlScore(t *testing.T, in string, args ...string) [][]float64 {
	t.Helper()
	stdout, stderr, code := runHacrl(t, append([]string{"score", "--jsonl", in}, args...)...)
	if code != 0 {
		t.Fatalf("hacrl score %v: exit status %d: %s", args, code, stderr)
	}
	var lps [][]float64
	for _, o := range jsonObjects(t, stdout) {
		lps = append(lps, floatsOf(t, o["logprobs"]))
	}
	return lps
}

// closeTo reports the largest |got − want| and whether the shapes agree
// and every difference is within tol.
func closeTo(got, want [][]float64, tol float64) (float64, bool) {
	if len(got) != len(want) {
		return math.Inf(1), false
	}
	worst := 0.0
	for i := range got {
		if len(got[i]) != len(want[i]) {
			return math.Inf(1), false
		}
		for j := range got[i] {
			d := math.Abs(got[i][j] - want[i][j])
			if !(d <= worst) {
				worst = d
			}
		}
	}
	return worst, worst <= tol
}

func float64s(v [][]float32) [][]float64 {
	out := make([][]float64, len(v))
	for i, r := range v {
		for _, x := range r {
			out[i] = append(out[i], float64(x))
		}
	}
	return out
}

// TestPEFTOracle holds hacrl's LoRA adapters to PEFT's reading of them,
// on Qwen3 and Llama 3.2 stand-ins (published configs, full vocabularies,
// random bfloat16 weights) and the shipped GPT-2 agent (Conv1D layers,
// PEFT's fan_in_fan_out), all loaded in float32 on both sides:
//
//   - a real `hacrl train` run with a LoRA agent on each base (rank 8,
//     alpha 16, all-linear; rsLoRA on the Llama agent): PEFT's
//     PeftModel.from_pretrained(base, OUT/final/<agent>) scores what hacrl
//     score of the adapter directory does, within 1e-4;
//   - `hacrl merge` of each trained adapter, and of PEFT's own rsLoRA
//     adapter on GPT-2, equals PEFT's merge_and_unload saved with save_pretrained:
//     every weight within float32 rounding, and the log-probs of both
//     merged checkpoints within 1e-4;
//   - adapters PEFT makes and saves itself (r 8, lora_alpha 16,
//     target_modules all-linear, with and without use_rslora, B drawn at
//     random) score in hacrl — hacrl score --adapter and model.LoadAdapters
//     — as in PEFT, and hacrl generate --adapter samples greedily from the
//     model PEFT scores, and hacrl eval takes them with --adapter;
//   - hacrl eval of the trained GPT-2 adapter gives the greedy accuracy of
//     PEFT's merge of it.
func TestPEFTOracle(t *testing.T) {
	pyenv.Python(t)
	npmDir := npmtest.Dir(t)
	b, err := backend.New(backend.Sequential)
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	qwen, llama := filepath.Join(tmp, "qwen3"), filepath.Join(tmp, "llama3.2")
	for _, s := range []struct{ dir, model, tok string }{
		{qwen, hfstandin.Qwen3_0_6B, "qwen3"}, {llama, hfstandin.Llama3_2_1BInstruct, "llama3"},
	} {
		if err := hfstandin.Write(b, s.dir, npmtest.Model(npmDir, s.tok), hfstandin.Small(s.model, 3)); err != nil {
			t.Fatal(err)
		}
	}
	gpt := must(filepath.Abs(lookAgents[0]))
	bases := []peftBase{
		{"qwen3", qwen, []peftSeq{{[]int{9707, 11, 1879}, []int{0, 151935, 42, 7}}, {[]int{151643, 3838}, []int{1000, 2}}}},
		{"llama3.2", llama, []peftSeq{{[]int{128000, 9906, 11}, []int{1917, 128255, 13}}, {[]int{5, 6}, []int{70000, 8, 9}}}},
		{"gpt2", gpt, []peftSeq{{[]int{1, 5, 6, 7}, []int{8, 9, 10, 2}}, {[]int{1, 20, 21}, []int{22, 23}}}},
	}

	// A real training run: one LoRA agent on each base, one step, with a
	// reward that varies so that the adapters move off B = 0.
	out := trainOneStep(t, tmp, "peft-oracle", 3, fmt.Sprintf(
		`  - {name: qwen3, checkpoint: %s, lora: {rank: 8}, optimizer: {lr: 0.01}, sampling: {max_new_tokens: 6}}
  - {name: llama3.2, checkpoint: %s, lora: {rank: 8, use_rslora: true}, optimizer: {lr: 0.01}, sampling: {max_new_tokens: 6}}
  - {name: gpt2, checkpoint: %s, lora: {rank: 8}, optimizer: {lr: 0.001}, sampling: {max_new_tokens: 6}}
`, qwen, llama, gpt))

	// PEFT: its own adapters, its reading of the trained ones, its merge.
	var jobs []map[string]any
	madeMerge := -1 // the job that merges PEFT's own adapter
	for i, base := range bases {
		for _, rs := range []bool{false, true} {
			jobs = append(jobs, map[string]any{"op": "make", "base": base.dir, "out": filepath.Join(tmp, "peft", fmt.Sprintf("%s-rslora-%v", base.name, rs)),
				"r": 8, "alpha": 16, "rslora": rs, "seed": 10 + i, "b_std": 0.05, "seqs": base.seqs})
		}
		final := filepath.Join(out, "final", base.name)
		jobs = append(jobs, map[string]any{"op": "score", "base": base.dir, "adapter": final, "seqs": base.seqs},
			map[string]any{"op": "merge", "base": base.dir, "adapter": final, "out": filepath.Join(tmp, "peft-merged", base.name), "seqs": base.seqs})
		if base.name == "gpt2" { // PEFT's own adapter merged too: Conv1D, rsLoRA, PEFT's config
			madeMerge = len(jobs)
			jobs = append(jobs, map[string]any{"op": "merge", "base": base.dir, "adapter": filepath.Join(tmp, "peft", base.name+"-rslora-true"),
				"out": filepath.Join(tmp, "peft-merged", base.name+"-rslora-true"), "seqs": base.seqs})
		}
	}
	res := peftJobs(t, jobs)

	for i, base := range bases {
		made, trained, merged := res[4*i:4*i+2], res[4*i+2], res[4*i+3] // gpt2, last, has a fifth
		in := scoreFile(t, tmp, base.name, base.seqs)
		plain := hacrlScore(t, in, base.dir)

		// The trained adapter, as hacrl eval and score read a run's final agent.
		final := filepath.Join(out, "final", base.name)
		l, named, err := model.ReadAdapterConfig(final)
		if err != nil || l.Rank != 8 || l.Alpha != 16 || l.RSLoRA != (base.name == "llama3.2") || named != base.dir {
			t.Errorf("%s: the run's adapter %+v (%v), base %q; want rank 8, alpha 16, rsLoRA on llama3.2 only, base %s", base.name, l, err, named, base.dir)
		}
		got := hacrlScore(t, in, final)
		d, ok := closeTo(got, trained.LogProbs, peftTol)
		t.Logf("%s: trained adapter: max |hacrl − PEFT| %.2g", base.name, d)
		if !ok {
			t.Errorf("%s: hacrl score of the trained adapter %s: %v, PEFT %v (max |Δ| %g > %g)", base.name, final, got, trained.LogProbs, d, peftTol)
		}
		moved, _ := closeTo(plain, trained.LogProbs, 0)
		t.Logf("%s: the trained adapter moves log-probs by up to %.2g", base.name, moved)
		if d := moved; d < 1e-3 {
			t.Errorf("%s: the trained adapter moves no log-prob by 1e-3 (max |Δ| %g): the check shows nothing", base.name, d)
		}

		// hacrl merge against PEFT's merge_and_unload.
		hm := filepath.Join(tmp, "hacrl-merged", base.name)
		if _, stderr, code := runHacrl(t, "merge", "--adapter", final, "--out", hm, "--dtype", "float32"); code != 0 {
			t.Fatalf("%s: hacrl merge: exit status %d: %s", base.name, code, stderr)
		}
		compareWeights(t, base.name, hm, filepath.Join(tmp, "peft-merged", base.name))
		got = hacrlScore(t, in, hm)
		d, ok = closeTo(got, merged.LogProbs, peftTol)
		t.Logf("%s: merged: max |hacrl − PEFT| %.2g", base.name, d)
		if !ok {
			t.Errorf("%s: hacrl score of hacrl merge's checkpoint: %v, PEFT's merged model %v (max |Δ| %g > %g)", base.name, got, merged.LogProbs, d, peftTol)
		}
		got = hacrlScore(t, in, filepath.Join(tmp, "peft-merged", base.name))
		if d, ok := closeTo(got, merged.LogProbs, peftTol); !ok {
			t.Errorf("%s: hacrl score of PEFT's merged checkpoint: %v, PEFT %v (max |Δ| %g > %g)", base.name, got, merged.LogProbs, d, peftTol)
		}

		// PEFT's own adapters, through --adapter and model.LoadAdapters.
		m, err := model.Load(b, base.dir)
		if err != nil {
			t.Fatal(err)
		}
		var seqs []model.Sequence
		for _, s := range base.seqs {
			seqs = append(seqs, model.Sequence{Prompt: s.Prompt, Response: s.Response})
		}
		for k, rs := range []bool{false, true} {
			dir := filepath.Join(tmp, "peft", fmt.Sprintf("%s-rslora-%v", base.name, rs))
			want := made[k].LogProbs
			if d, _ := closeTo(plain, want, 0); d < 1e-2 {
				t.Errorf("%s rslora %v: PEFT's adapter moves no log-prob by 1e-2 (max |Δ| %g): the check shows nothing", base.name, rs, d)
			}
			got := hacrlScore(t, in, base.dir, "--adapter", dir)
			d, ok := closeTo(got, want, peftTol)
			t.Logf("%s: PEFT's adapter, use_rslora %v: max |hacrl − PEFT| %.2g", base.name, rs, d)
			if !ok {
				t.Errorf("%s: hacrl score --adapter of PEFT's adapter (use_rslora %v): %v, PEFT %v (max |Δ| %g > %g)", base.name, rs, got, want, d, peftTol)
			}
			if rs {
				// The adapter directory alone: its base is PEFT's base_model_name_or_path.
				got := hacrlScore(t, in, dir)
				if d, ok := closeTo(got, want, peftTol); !ok {
					t.Errorf("%s: hacrl score of PEFT's adapter directory: %v, PEFT %v (max |Δ| %g > %g)", base.name, got, want, d, peftTol)
				}
			}
			if rs && base.name == "gpt2" {
				mergedMade := res[madeMerge]
				// hacrl merge of PEFT's rsLoRA adapter against PEFT's merge of it.
				hm := filepath.Join(tmp, "hacrl-merged", base.name+"-rslora-true")
				if _, stderr, code := runHacrl(t, "merge", "--adapter", dir, "--base", base.dir, "--out", hm, "--dtype", "float32"); code != 0 {
					t.Fatalf("%s: hacrl merge of PEFT's adapter: exit status %d: %s", base.name, code, stderr)
				}
				compareWeights(t, base.name+" (PEFT's rsLoRA adapter)", hm, filepath.Join(tmp, "peft-merged", base.name+"-rslora-true"))
				got = hacrlScore(t, in, hm)
				if d, ok := closeTo(got, mergedMade.LogProbs, peftTol); !ok {
					t.Errorf("%s: hacrl merge of PEFT's adapter scores %v, PEFT's merge %v (max |Δ| %g > %g)", base.name, got, mergedMade.LogProbs, d, peftTol)
				}
			}
			if err := m.LoadAdapters(dir); err != nil {
				t.Fatalf("%s: model.LoadAdapters of PEFT's adapter: %v", base.name, err)
			}
			if l, _ := m.LoRA(); l.Rank != 8 || l.Alpha != 16 || l.RSLoRA != rs {
				t.Errorf("%s: PEFT's adapter loads as %+v, want rank 8, alpha 16, rslora %v", base.name, l, rs)
			}
			sc, err := m.Score(context.Background(), seqs, false)
			if err != nil {
				t.Fatal(err)
			}
			if d, ok := closeTo(float64s(sc.LogProbs), want, peftTol); !ok {
				t.Errorf("%s: model.LoadAdapters of PEFT's adapter (use_rslora %v) scores %v, PEFT %v (max |Δ| %g > %g)", base.name, rs, sc.LogProbs, want, d, peftTol)
			}
		}
	}
	checkGenerate(t, tmp, bases)

	// hacrl eval takes PEFT's adapter with --adapter; and on the shipped
	// GPT-2 agent (which solves the task), the trained adapter evaluates
	// as PEFT's merge of it does.
	peftAdapter := filepath.Join(tmp, "peft", "gpt2-rslora-true")
	r, stderr, code := runEval(t, gpt, "--adapter", peftAdapter, "--set", "test", "--problems", "20", "--max-new-tokens", "40")
	if code != 0 || r["adapter"] != peftAdapter || r["greedy_acc"] == nil {
		t.Errorf("hacrl eval --adapter of PEFT's adapter: exit status %d, %v: %s", code, r, stderr)
	}
	r1, stderr, code := runEval(t, filepath.Join(out, "final", "gpt2"), "--set", "test", "--problems", "20", "--max-new-tokens", "40")
	if code != 0 {
		t.Fatalf("hacrl eval of the trained adapter: exit status %d: %s", code, stderr)
	}
	r2, stderr, code := runEval(t, filepath.Join(tmp, "peft-merged", "gpt2"), "--set", "test", "--problems", "20", "--max-new-tokens", "40")
	if code != 0 {
		t.Fatalf("hacrl eval of PEFT's merged checkpoint: exit status %d: %s", code, stderr)
	}
	if r1["greedy_acc"] == nil || r1["greedy_acc"] == 0.0 || r1["greedy_acc"] != r2["greedy_acc"] {
		t.Errorf("hacrl eval: greedy accuracy %v with the trained adapter, %v with PEFT's merge of it", r1["greedy_acc"], r2["greedy_acc"])
	}
	t.Logf("gpt2: greedy accuracy %v with the trained adapter and with PEFT's merge of it", r1["greedy_acc"])
}

// checkGenerate: hacrl generate --adapter with PEFT's adapter samples
// greedily from the model PEFT reads: every token it picks is one of PEFT's
// best there (within the tolerance) and has the log-prob PEFT gives it.
func checkGenerate(t *testing.T, tmp string, bases []peftBase) {
	t.Helper()
	var jobs []map[string]any
	var lines [][]map[string]any
	for _, base := range bases {
		adapter := filepath.Join(tmp, "peft", base.name+"-rslora-true")
		stdout, stderr, code := runHacrl(t, "generate", base.dir, "--adapter", adapter, "--json", "--logprobs", "--max-new-tokens", "6", "12+7=", "40-3=")
		if code != 0 {
			t.Fatalf("%s: hacrl generate --adapter: exit status %d: %s", base.name, code, stderr)
		}
		ls := jsonObjects(t, stdout)
		var seqs []peftSeq
		for _, l := range ls {
			seqs = append(seqs, peftSeq{intsOf(t, l["prompt_ids"]), intsOf(t, l["response_ids"])})
		}
		lines = append(lines, ls)
		jobs = append(jobs, map[string]any{"op": "score", "base": base.dir, "adapter": adapter, "seqs": seqs})
	}
	res := peftJobs(t, jobs)
	for i, base := range bases {
		for j, l := range lines[i] {
			lp := floatsOf(t, l["logprobs"])
			want, best := res[i].LogProbs[j], res[i].Best[j]
			if len(lp) == 0 || len(lp) != len(want) {
				t.Fatalf("%s: generate line %d: %d log-probs, PEFT scored %d tokens", base.name, j, len(lp), len(want))
			}
			for k := range lp {
				if math.Abs(lp[k]-want[k]) > peftTol || want[k] < best[k]-peftTol {
					t.Errorf("%s: generate line %d token %d: log-prob %v, PEFT %v (PEFT's best %v)", base.name, j, k, lp[k], want[k], best[k])
				}
			}
		}
	}
}

// compareWeights checks that the checkpoints hacrl merge wrote (hdir) and
// PEFT's merge_and_unload saved (pdir) hold the same tensors, each element
// within float32 rounding of the tensor's scale: |h − p| ≤ 2⁻²¹·max|p|
// (8 units in the last place of its largest element; 2.2 measured).
// Tensors one of them leaves out because the embeddings are tied may be
// missing from it.
func compareWeights(t *testing.T, name, hdir, pdir string) {
	t.Helper()
	h, _, err := safetensors.Read(filepath.Join(hdir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	p, _, err := safetensors.Read(filepath.Join(pdir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	canon := func(n string) string { return strings.TrimPrefix(n, "transformer.") }
	pc := map[string]safetensors.Tensor{}
	for n, v := range p {
		pc[canon(n)] = v
	}
	matched, ulps := 0, 0.0
	for n, hv := range h {
		pv, ok := pc[canon(n)]
		if !ok {
			if canon(n) != "lm_head.weight" {
				t.Errorf("%s: hacrl merge wrote %s, PEFT's merged checkpoint lacks it", name, n)
			}
			continue
		}
		matched++
		delete(pc, canon(n))
		hs, err1 := hv.Float32s()
		ps, err2 := pv.Float32s()
		if err1 != nil || err2 != nil || hv.DType != "F32" || len(hs) != len(ps) || fmt.Sprint(hv.Shape) != fmt.Sprint(pv.Shape) {
			t.Errorf("%s: %s: hacrl %s %v, PEFT %s %v (%v, %v)", name, n, hv.DType, hv.Shape, pv.DType, pv.Shape, err1, err2)
			continue
		}
		scale := 0.0
		for _, x := range ps {
			scale = math.Max(scale, math.Abs(float64(x)))
		}
		worst, at := 0.0, 0
		for j := range hs {
			if d := math.Abs(float64(hs[j]) - float64(ps[j])); !(d <= worst) {
				worst, at = d, j
			}
		}
		ulps = math.Max(ulps, worst/(scale*math.Pow(2, -24)))
		if !(worst <= scale*math.Pow(2, -21)) {
			t.Errorf("%s: merged %s[%d]: hacrl %v, PEFT %v (|Δ| %g > 2⁻²¹·max|w| = 2⁻²¹·%g)", name, n, at, hs[at], ps[at], worst, scale)
		}
	}
	for n := range pc {
		if n != "lm_head.weight" {
			t.Errorf("%s: PEFT's merged checkpoint has %s, hacrl merge's lacks it", name, n)
		}
	}
	if matched == 0 {
		t.Errorf("%s: the merged checkpoints share no tensor", name)
	}
	t.Logf("%s: merged weights: %d tensors, max |hacrl − PEFT| %.2g units of 2⁻²⁴·max|w| of its tensor", name, matched, ulps)
}

// trainOneStep runs one real `hacrl train` step of the agents (YAML list
// items, one per line) on two-digit arithmetic, with a reward that varies
// (train/testdata/logreward.py) so that every agent's weights move, and
// returns the run's output directory under tmp.
func trainOneStep(t *testing.T, tmp, name string, seed int, agents string) string {
	t.Helper()
	out := filepath.Join(tmp, "run")
	cfg := filepath.Join(tmp, name+".yaml")
	yaml := fmt.Sprintf(`name: %s
seed: %d
out: %s
steps: 1
method: {name: hacpo}
task: {name: arith, digits: 2, operators: "+-"}
reward: {command: [%q, %q, %q]}
batch: {prompts_per_step: 2, responses_per_prompt: 2, mini_batch: 2, micro_batch: 2}
agents:
%seval: {every: 0, sets: []}
`, name, seed, out, pyenv.Python(t), must(filepath.Abs("../../train/testdata/logreward.py")), filepath.Join(tmp, "reward.log"), agents)
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := runHacrl(t, "train", cfg); code != 0 {
		t.Fatalf("hacrl train: exit status %d: %s", code, stderr)
	}
	return out
}

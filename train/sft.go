package train

import (
	"context"
	"fmt"
	"io"

	"math/rand/v2"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/hacrl/hacrl/backend"
	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/internal/atomicfile"
	"github.com/hacrl/hacrl/model"
	"github.com/hacrl/hacrl/task"
	"github.com/hacrl/hacrl/tokenizer"
)

// SFTResult reports a warm start.
type SFTResult struct {
	Steps     int
	FinalLoss float64
	// Accuracy is the greedy accuracy on the held-out split at the end (−1 if not evaluated).
	Accuracy float64
	Elapsed  time.Duration
}

// Specials returns the special tokens hacrl gives the tokenizers it builds for
// a template kind: padding, begin and end of text, unknown, and the ChatML
// markers for chat templates.
func Specials(templateKind string) []string {
	s := []string{"<pad>", "<s>", "</s>", "<unk>"}
	if templateKind == "chat" {
		s = append(s, tokenizer.IMStart, tokenizer.IMEnd)
	}
	return s
}

// SFT runs a supervised warm start: cross-entropy on the worked solutions of
// the task's training problems, then saves the agent as a checkpoint
// directory (config.json, model.safetensors, tokenizer.json, optimizer state).
func SFT(ctx context.Context, cfg *config.SFT, log io.Writer) (*SFTResult, error) {
	t0 := time.Now()
	if cfg.Checkpoint != "" {
		if err := ModelDirError(cfg.Where("checkpoint"), cfg.Checkpoint); err != nil {
			return nil, err
		}
	}
	var tk task.Task
	var err error
	if cfg.Task != nil {
		if tk, err = newTask(cfg.Task); err != nil {
			err = fmt.Errorf("%s: %w", cfg.Where("task"), err)
		}
	} else if tk, err = loadDataset(cfg.Dataset); err != nil {
		err = fmt.Errorf("%s: %w", cfg.Where("dataset.path"), err)
	}
	if err != nil {
		return nil, err
	}
	n, finite := task.Len(tk, task.Train)
	if !finite || (cfg.Examples > 0 && cfg.Examples < n) {
		n = cfg.Examples
	}
	probs := make([]task.Problem, n)
	targets := make([]string, n)
	for i := range probs {
		probs[i] = tk.Problem(task.Train, i)
		targets[i] = probs[i].Solution
		if targets[i] == "" {
			targets[i] = probs[i].Answer
		}
	}
	b, err := backend.New(backend.Choose(cfg.Backend))
	if err != nil {
		return nil, err
	}
	a := &Agent{Name: filepath.Base(cfg.Out), Opt: cfg.Optimizer, Task: cfg.Task}
	tmpl, note, err := AgentTemplate(cfg.Template, cfg.Checkpoint, cfg.Tokenizer.Path)
	if err != nil {
		return nil, fmt.Errorf("sft: %w", err)
	}
	if note != "" {
		fmt.Fprintf(log, "sft: %s\n", note)
	}
	a.Template = tmpl
	switch {
	case cfg.Checkpoint != "":
		if err := verifyDir(cfg.Checkpoint); err != nil {
			return nil, fmt.Errorf("sft: %w", err)
		}
		if a.Model, err = model.Load(b, cfg.Checkpoint); err != nil {
			return nil, err
		}
		tokPath := cfg.Tokenizer.Path
		if tokPath == "" {
			tokPath = filepath.Join(cfg.Checkpoint, "tokenizer.json")
		}
		if a.Tok, err = tokenizer.Load(tokPath); err != nil {
			return nil, err
		}
		if err := CheckVocab(a.Tok, tokPath, a.Model); err != nil {
			return nil, fmt.Errorf("sft: %w", err)
		}
	default:
		if a.Tok, err = sftTokenizer(ctx, cfg, probs, targets); err != nil {
			return nil, err
		}
		seed := cfg.Model.Seed // the model's own seed when given, else the run's
		if seed == 0 {
			seed = cfg.Seed
		}
		if a.Model, err = model.New(b, newModelConfig(cfg.Model, a.Tok), seed); err != nil {
			return nil, err
		}
	}
	tokPath := cfg.Tokenizer.Path
	if cfg.Checkpoint != "" && tokPath == "" {
		tokPath = filepath.Join(cfg.Checkpoint, "tokenizer.json")
	}
	if a.Template.Kind == tokenizer.KindHF && tokPath == "" {
		return nil, fmt.Errorf("sft: template.kind hf needs a tokenizer_config.json beside a tokenizer.json: give a checkpoint or tokenizer.path")
	}
	if err := PrepareTemplate(&a.Template, tokPath, a.Tok, a.Model); err != nil {
		return nil, fmt.Errorf("sft: %w", err)
	}
	if a.tokFiles, err = readTemplateFiles(tokPath); err != nil {
		return nil, fmt.Errorf("sft: %w", err)
	}
	engine, err := model.ParseEngine(cfg.Engine)
	if err != nil {
		return nil, err
	}
	a.Model.SetEngine(engine)
	stop := a.Template.StopTokens(a.Tok)
	if len(stop) == 0 {
		return nil, fmt.Errorf("sft: the tokenizer has no EOS token")
	}
	if a.Trainer, err = model.NewTrainer(a.Model, optimizerConfig(cfg.Optimizer)); err != nil {
		return nil, err
	}
	a.Sampling = model.SampleOptions{MaxNewTokens: cfg.Eval.MaxNewTokens, Temperature: 1, TopP: 1, Stop: stop, Vocab: a.Tok.VocabSize()}

	seqs := make([]model.Sequence, 0, n)
	maxSeq := a.Model.Config().MaxSeq
	var long []string
	for i := range probs {
		resp := append(a.Tok.Encode(targets[i]), stop[0])
		s := model.Sequence{Prompt: a.Template.Prompt(a.Tok, probs[i].Question), Response: resp}
		if l := len(s.Prompt) + len(resp); l > maxSeq {
			long = append(long, fmt.Sprintf("%s (%d tokens)", probs[i].ID, l))
			continue
		}
		seqs = append(seqs, s)
	}
	if len(long) > 0 {
		names := strings.Join(long[:min(len(long), shownMisfits)], ", ")
		if len(long) > shownMisfits {
			names += fmt.Sprintf(" and %d more", len(long)-shownMisfits)
		}
		msg := fmt.Sprintf("%d of %d examples have a prompt + solution longer than the model's context of %d: %s", len(long), n, maxSeq, names)
		switch {
		case cfg.Dataset == nil:
			return nil, fmt.Errorf("sft: %s (raise model.max_seq)", msg)
		case cfg.Dataset.TooLong != "drop":
			return nil, fmt.Errorf("sft: %s (raise model.max_seq, or leave them out with dataset.too_long: drop)", msg)
		case len(seqs) == 0:
			return nil, fmt.Errorf("sft: %s: none left to train on", msg)
		}
		fmt.Fprintf(log, "sft: dropped %s (dataset.too_long: drop)\n", msg)
		n = len(seqs)
	}
	evalProbs := make([]task.Problem, 0, cfg.Eval.Problems)
	if m, fin := task.Len(tk, task.Test); cfg.Eval.Problems > 0 && (!fin || m > 0) {
		k := cfg.Eval.Problems
		if fin && m < k {
			k = m
		}
		for i := range k {
			evalProbs = append(evalProbs, tk.Problem(task.Test, i))
		}
	}
	evalAcc := func() (float64, error) {
		if len(evalProbs) == 0 {
			return -1, nil
		}
		res, err := Evaluate(ctx, a, tk, evalProbs, config.EvalSet{MaxNewTokens: cfg.Eval.MaxNewTokens},
			func(string) *randSource { return rand.New(rand.NewPCG(uint64(cfg.Seed), 7)) })
		if err != nil {
			return 0, err
		}
		return res.Values["greedy_acc"], nil
	}
	fmt.Fprintf(log, "sft: %s model, %d params, %d tokens in vocabulary, %d examples, %d steps of %d\n",
		a.Model.Config().Family, a.Model.NumParams(), a.Tok.VocabSize(), n, cfg.Steps, cfg.BatchSize)

	rng := rand.New(rand.NewPCG(uint64(cfg.Seed), 0x5f7))
	order := rng.Perm(n)
	pos := 0
	res := &SFTResult{Accuracy: -1}
	var lossSum float64
	var lossN int
	for step := range cfg.Steps {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		batch := make([]model.Sequence, 0, cfg.BatchSize)
		for len(batch) < cfg.BatchSize {
			if pos == n {
				order, pos = rng.Perm(n), 0
			}
			batch = append(batch, seqs[order[pos]])
			pos++
		}
		tokens := 0
		for _, s := range batch {
			tokens += len(s.Response)
		}
		w := make([][]float32, len(batch))
		for i, s := range batch {
			w[i] = make([]float32, len(s.Response))
			for j := range w[i] {
				w[i][j] = float32(-1 / float64(tokens))
			}
		}
		lp, err := a.Trainer.Accumulate(ctx, batch, w)
		if err != nil {
			return nil, fmt.Errorf("sft step %d: %w", step+1, err)
		}
		var nll float64
		for _, row := range lp {
			for _, v := range row {
				nll -= float64(v)
			}
		}
		if _, err := a.Trainer.Apply(ctx, learningRate(cfg.Optimizer, step, cfg.Steps)); err != nil {
			return nil, fmt.Errorf("sft step %d: %w", step+1, err)
		}
		lossSum += nll / float64(tokens)
		lossN++
		last := step+1 == cfg.Steps
		if (step+1)%50 == 0 || last {
			res.FinalLoss = lossSum / float64(lossN)
			line := fmt.Sprintf("sft step %d/%d loss %.4f", step+1, cfg.Steps, res.FinalLoss)
			if (cfg.Eval.Every > 0 && (step+1)%cfg.Eval.Every == 0) || last {
				acc, err := evalAcc()
				if err != nil {
					return nil, err
				}
				if acc >= 0 {
					res.Accuracy = acc
					line += fmt.Sprintf(" test greedy acc %.3f (%d problems)", acc, len(evalProbs))
				}
			}
			fmt.Fprintf(log, "%s (%s)\n", line, time.Since(t0).Round(time.Second))
			lossSum, lossN = 0, 0
		}
	}
	res.Steps = cfg.Steps
	if err := atomicfile.WriteDir(cfg.Out, withChecksums(func(tmp string) error {
		if err := saveAgent(a, tmp, false); err != nil {
			return err
		}
		return writeJSON(filepath.Join(tmp, "sft.json"), map[string]any{
			"steps": res.Steps, "final_loss": res.FinalLoss, "test_greedy_acc": res.Accuracy, "examples": n,
		})
	})); err != nil {
		return nil, fmt.Errorf("sft: saving %s: %w", cfg.Out, err)
	}
	res.Elapsed = time.Since(t0)
	return res, nil
}

// sftTokenizer builds the tokenizer an SFT config asks for.
func sftTokenizer(ctx context.Context, cfg *config.SFT, probs []task.Problem, targets []string) (tokenizer.Tokenizer, error) {
	if cfg.Tokenizer.Path != "" {
		return tokenizer.Load(cfg.Tokenizer.Path)
	}
	specials := Specials(cfg.Template.Kind)
	corpus := make([]string, 0, 2*len(probs))
	for i, p := range probs {
		corpus = append(corpus, p.Question, targets[i])
	}
	if cfg.Template.Kind == "chat" || cfg.Template.System != "" {
		corpus = append(corpus, "User: ", "Assistant: ", "user", "assistant", "system", cfg.Template.System)
	}
	switch cfg.Tokenizer.Kind {
	case "char":
		return tokenizer.NewChar(Alphabet(corpus), specials)
	case "bpe":
		return tokenizer.TrainBPE(ctx, corpus, cfg.Tokenizer.VocabSize, specials)
	}
	return nil, fmt.Errorf("sft: tokenizer.kind %q", cfg.Tokenizer.Kind)
}

// Alphabet is printable ASCII plus every other character of the corpus, sorted.
func Alphabet(corpus []string) string {
	set := map[rune]bool{'\n': true}
	for r := rune(32); r < 127; r++ {
		set[r] = true
	}
	for _, s := range corpus {
		for _, r := range s {
			set[r] = true
		}
	}
	rs := make([]rune, 0, len(set))
	for r := range set {
		rs = append(rs, r)
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i] < rs[j] })
	return strings.ToValidUTF8(string(rs), "")
}

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/hacrl/hacrl/model"
	"github.com/hacrl/hacrl/tokenizer"
	"github.com/hacrl/hacrl/train"
	"github.com/spf13/cobra"
)

// genInput is one prompt of hacrl generate: a question, or a conversation
// (from a JSONL --file).
type genInput struct {
	Prompt   string              `json:"prompt,omitempty"`
	Messages []tokenizer.Message `json:"messages,omitempty"`
	where    string              // "argument 2", "prompts.txt:3", for errors
}

// genRecord is one (prompt, sample) line of hacrl generate --json.
type genRecord struct {
	Index       int                 `json:"index"`
	Sample      int                 `json:"sample"`
	Prompt      *string             `json:"prompt,omitempty"`
	Messages    []tokenizer.Message `json:"messages,omitempty"`
	PromptIDs   []int               `json:"prompt_ids"`
	Response    string              `json:"response"`
	ResponseIDs []int               `json:"response_ids"`
	Stop        string              `json:"stop"`
	LogProbs    []float32           `json:"logprobs,omitempty"`
	SumLogProb  *float64            `json:"sum_logprob,omitempty"`
}

func generateCmd() *cobra.Command {
	var (
		tf                   templateFlags
		file, backendCfg     string
		computeDType         computeDTypeFlag
		raw, logprobs, asJSN bool
		maxNew, topK, n      int
		temperature, topP    float64
		seed                 int64
	)
	cmd := &cobra.Command{
		Use:   "generate CHECKPOINT [PROMPT...]",
		Short: "Generate responses of one saved agent to prompts",
		Long: `Generate responses of one saved agent, alone, to each PROMPT argument or to
the prompts of --file FILE (- for standard input): one prompt per line
(blank lines skipped), or, for a file whose name ends in .jsonl, one JSON
object per line with "prompt" (text) or "messages" (a list of
{"role", "content"}).

A prompt is a question that goes through the checkpoint's template (see
below; --template, --system and --var change it), as training and
hacrl eval send it; messages are rendered as a whole conversation with the
generation prompt (see hacrl prompt). --raw sends the text as it is,
without a template or BOS token.

Decoding is greedy unless --temperature is above 0, and stops at every
stop token the agent declares (EOS, the template's end of turn and any
others its checkpoint names), after --max-new-tokens (the agent's by
default) or at the end of the model's context. All prompts and --samples run as one batch; --seed
fixes the draws.

Prints each response's text, or with --json one JSON line per (prompt,
sample): index, sample, prompt (or messages), prompt_ids, response (the
text, stop token left out), response_ids (a final stop token included),
stop ("eos" when a stop token ended it, else "length"), and with
--logprobs the log-probability of each response token under the model
(temperature 1, unfiltered) and their sum sum_logprob: what hacrl score
gives for the same prompt_ids and response_ids.

` + varsHelp + "\n\n" + adapterHelp,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f := cmd.Flags()
			if err := tf.check(); err != nil {
				return err
			}
			switch {
			case len(args) == 1 && file == "":
				return usage("give a PROMPT or --file FILE")
			case len(args) > 1 && file != "":
				return usage("give PROMPT arguments or --file FILE, not both")
			case raw && (tf.kind != "" || len(tf.vars) > 0 || f.Changed("system")):
				return usage("--raw sends the text as it is; it takes no --template, --var or --system")
			case n < 1:
				return usage("--samples must be >= 1, got %d", n)
			case maxNew < 0:
				return usage("--max-new-tokens must be >= 0 (0: the agent's), got %d", maxNew)
			case temperature < 0 || math.IsNaN(temperature) || math.IsInf(temperature, 0):
				return usage("--temperature must be a finite number >= 0 (0: greedy), got %v", temperature)
			case !(topP > 0 && topP <= 1):
				return usage("--top-p must be within (0, 1] (1: off), got %v", topP)
			case topK < 0:
				return usage("--top-k must be >= 0 (0: off), got %d", topK)
			case temperature == 0 && (f.Changed("top-p") || f.Changed("top-k")):
				return usage("--top-p and --top-k apply to sampling; give --temperature > 0 (0 is greedy)")
			}
			if _, err := computeDType.dtype(); err != nil { // before loading anything
				return err
			}
			inputs := make([]genInput, 0, len(args)-1)
			for i, p := range args[1:] {
				inputs = append(inputs, genInput{Prompt: p, where: fmt.Sprintf("argument %d", i+1)})
			}
			if file != "" {
				var err error
				if inputs, err = readPromptFile(cmd, file); err != nil {
					return err
				}
			}
			_, a, _, err := tf.loadAgent(cmd, args[0], backendCfg)
			if err != nil {
				return err
			}
			if err := computeDType.apply(a.Model); err != nil {
				return err
			}
			opt := a.Sampling
			opt.Temperature, opt.TopP, opt.TopK, opt.Greedy = temperature, topP, topK, false
			if maxNew > 0 {
				opt.MaxNewTokens = maxNew
			}
			prompts, err := encodeInputs(a, inputs, raw)
			if err != nil {
				return err
			}
			batch := make([][]int, 0, len(prompts)*n)
			for _, p := range prompts {
				for range n {
					batch = append(batch, p)
				}
			}
			samples, err := a.Model.Generate(cmd.Context(), batch, opt, rand.New(rand.NewPCG(uint64(seed), 0)))
			if err != nil {
				return err
			}
			return writeSamples(cmd.OutOrStdout(), a, inputs, prompts, samples, n, logprobs, asJSN)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&file, "file", "", "prompts, one per line (a .jsonl file: JSON objects with \"prompt\" or \"messages\"); - for standard input")
	fl.BoolVar(&raw, "raw", false, "send the prompt text as it is, without the template")
	tf.register(fl, true)
	tf.adapter.register(fl)
	fl.IntVar(&maxNew, "max-new-tokens", 0, "response length limit (default: the agent's)")
	fl.Float64Var(&temperature, "temperature", 0, "sampling temperature (0: greedy)")
	fl.Float64Var(&topP, "top-p", 1, "nucleus sampling mass (1: off)")
	fl.IntVar(&topK, "top-k", 0, "sample among the k most likely tokens (0: off)")
	fl.IntVar(&n, "samples", 1, "responses per prompt")
	fl.Int64Var(&seed, "seed", 0, "sampling seed")
	fl.BoolVar(&logprobs, "logprobs", false, "report each response token's log-probability")
	fl.BoolVar(&asJSN, "json", false, "print one JSON line per (prompt, sample)")
	fl.StringVar(&backendCfg, "backend", "", "GoMLX backend config")
	computeDType.register(fl, "the matrix products' dtype: float32, or bfloat16 (the graph engine on the XLA backend)")
	return cmd
}

// writeSamples prints generate's results: for each prompt its n samples, as
// text or (asJSON) one JSON line each, with the log-probs when asked.
func writeSamples(out io.Writer, a *train.Agent, inputs []genInput, prompts [][]int, samples []model.Sample, n int, logprobs, asJSON bool) error {
	w := bufio.NewWriter(out)
	for k, smp := range samples {
		i := k / n
		rec := genRecord{Index: i, Sample: k % n, Messages: inputs[i].Messages, PromptIDs: prompts[i],
			Response: responseText(a.Tok, smp), ResponseIDs: smp.Tokens, Stop: "length"}
		if rec.ResponseIDs == nil {
			rec.ResponseIDs = []int{}
		}
		if inputs[i].Messages == nil {
			rec.Prompt = &inputs[i].Prompt
		}
		if smp.Stopped {
			rec.Stop = "eos"
		}
		if logprobs {
			rec.LogProbs = smp.LogProbs
			sum := sumLogProbs(smp.LogProbs)
			rec.SumLogProb = &sum
		}
		var err error
		if asJSON {
			err = writeJSONLine(w, rec)
		} else {
			err = writeHuman(w, a.Tok, rec, len(samples) > 1)
		}
		if err != nil {
			return err
		}
	}
	return w.Flush()
}

// readPromptFile reads generate's --file: a .jsonl file of {"prompt"} or
// {"messages"} objects, or text with one prompt per line. Errors name the
// line.
func readPromptFile(cmd *cobra.Command, path string) ([]genInput, error) {
	r, err := openInput(cmd, path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	jsonl := strings.HasSuffix(path, ".jsonl")
	var inputs []genInput
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<26)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSuffix(strings.TrimPrefix(sc.Text(), "\uFEFF"), "\r")
		if strings.TrimSpace(text) == "" {
			continue
		}
		where := fmt.Sprintf("%s:%d", path, line)
		if !jsonl {
			inputs = append(inputs, genInput{Prompt: text, where: where})
			continue
		}
		in, err := parsePromptLine([]byte(text))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		in.where = where
		inputs = append(inputs, in)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(inputs) == 0 {
		return nil, fmt.Errorf("%s: no prompts", path)
	}
	return inputs, nil
}

// parsePromptLine reads one JSONL prompt: {"prompt": text} or
// {"messages": [...]}; other fields are ignored.
func parsePromptLine(line []byte) (genInput, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(line, &obj); err != nil {
		return genInput{}, fmt.Errorf("want a JSON object: %v", err)
	}
	var in genInput
	p, hasP := obj["prompt"]
	m, hasM := obj["messages"]
	switch {
	case hasP && hasM:
		return in, fmt.Errorf(`give "prompt" or "messages", not both`)
	case hasP:
		if err := json.Unmarshal(p, &in.Prompt); err != nil {
			return in, fmt.Errorf(`"prompt" must be a string, got %.60s`, p)
		}
	case hasM:
		msgs, err := parseMessages(m)
		if err != nil {
			return in, fmt.Errorf(`"messages": %w`, err)
		}
		in.Messages = msgs
	default:
		return in, fmt.Errorf(`expected "prompt" or "messages"`)
	}
	return in, nil
}

// encodeInputs renders and encodes each prompt for agent a and checks that
// it leaves the model room to answer.
func encodeInputs(a *train.Agent, inputs []genInput, raw bool) ([][]int, error) {
	out := make([][]int, len(inputs))
	maxSeq := a.Model.Config().MaxSeq
	for i, in := range inputs {
		var ids []int
		var err error
		switch {
		case in.Messages != nil && raw:
			err = fmt.Errorf("messages need a template; --raw takes prompt text")
		case in.Messages != nil:
			ids, err = a.Template.PromptMessages(a.Tok, in.Messages, true)
		case raw:
			ids = a.Tok.Encode(in.Prompt)
		default:
			ids, err = a.Template.PromptErr(a.Tok, in.Prompt)
		}
		switch {
		case err != nil:
		case len(ids) == 0:
			err = fmt.Errorf("the prompt encodes to no tokens")
		case len(ids) >= maxSeq:
			err = fmt.Errorf("the prompt has %d tokens; the model's %d positions leave no room for a response", len(ids), maxSeq)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", in.where, err)
		}
		out[i] = ids
	}
	return out, nil
}

// responseText is a sample's text, a final stop token left out (as
// training and evaluation read it).
func responseText(tok tokenizer.Tokenizer, s model.Sample) string {
	body := s.Tokens
	if s.Stopped && len(body) > 0 {
		body = body[:len(body)-1]
	}
	return tok.Decode(body)
}

func sumLogProbs(lp []float32) float64 {
	sum := 0.0
	for _, v := range lp {
		sum += float64(v)
	}
	return sum
}

// writeJSONLine writes v as one line of JSON, HTML characters unescaped.
func writeJSONLine(w io.Writer, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(b.Bytes())
	return err
}

// writeHuman writes a response for reading: a header when there are
// several, the text, and with log-probs one line per token.
func writeHuman(w io.Writer, tok tokenizer.Tokenizer, r genRecord, header bool) error {
	var b strings.Builder
	if header {
		fmt.Fprintf(&b, "=== prompt %d, sample %d (%s, %d tokens) ===\n", r.Index+1, r.Sample+1, r.Stop, len(r.ResponseIDs))
	}
	b.WriteString(r.Response + "\n")
	if r.LogProbs != nil {
		for j, id := range r.ResponseIDs {
			fmt.Fprintf(&b, "%10.4f  %6d  %q\n", r.LogProbs[j], id, tok.Decode([]int{id}))
		}
		fmt.Fprintf(&b, "sum_logprob %.4f\n", *r.SumLogProb)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

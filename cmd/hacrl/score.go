package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/hacrl/hacrl/internal/jsonobj"
	"github.com/hacrl/hacrl/model"
	"github.com/hacrl/hacrl/train"
	"github.com/spf13/cobra"
)

func scoreCmd() *cobra.Command {
	var (
		tf               templateFlags
		jsonl, backendCF string
		computeDType     computeDTypeFlag
		raw              bool
	)
	cmd := &cobra.Command{
		Use:   "score CHECKPOINT --jsonl FILE",
		Short: "Log-probability of given responses under one saved agent",
		Long: `Score responses under one saved agent: every line of --jsonl FILE (- for
standard input) is a JSON object giving a prompt and a response,

  "prompt_ids" (a list of token ids), or "messages" (a list of
  {"role", "content"}, rendered with the generation prompt, see hacrl
  prompt), or "prompt" (a question, rendered as training renders it; with
  --raw the text as it is);
  "response_ids", or "response" (text, encoded as it is: no stop token is
  added; give its id in response_ids to score one).

Ids win over text when a line has both (so hacrl generate --json output
can be scored as it is). Each line is written back to standard output, in
order, its fields unchanged, with "logprobs" (the log-probability of each
response token under the model at temperature 1) and "sum_logprob" added
(or replaced). A bad line is reported on standard error with its line
number and the others go on; the exit status is then 1. Only JSON goes to
standard output.

` + varsHelp + "\n\n" + adapterHelp,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := tf.check(); err != nil {
				return err
			}
			switch {
			case jsonl == "":
				return usage("--jsonl FILE is required (- for standard input)")
			case raw && (tf.kind != "" || len(tf.vars) > 0 || cmd.Flags().Changed("system")):
				return usage("--raw scores the prompt text as it is; it takes no --template, --var or --system")
			}
			in, err := openInput(cmd, jsonl)
			if err != nil {
				return err
			}
			defer in.Close()
			_, a, _, err := tf.loadAgent(cmd, args[0], backendCF)
			if err != nil {
				return err
			}
			if err := computeDType.apply(a.Model); err != nil {
				return err
			}
			lines, bad, err := readScoreLines(in, a, raw, cmd.ErrOrStderr())
			if err != nil {
				return fmt.Errorf("%s: %w", jsonl, err)
			}
			var seqs []model.Sequence
			for _, l := range lines {
				if len(l.seq.Response) > 0 {
					seqs = append(seqs, l.seq)
				}
			}
			var scores model.Scores
			if len(seqs) > 0 {
				if scores, err = a.Model.Score(cmd.Context(), seqs, false); err != nil {
					return err
				}
			}
			w := bufio.NewWriter(cmd.OutOrStdout())
			k := 0
			for _, l := range lines {
				lp := []float32{}
				if len(l.seq.Response) > 0 {
					lp, k = scores.LogProbs[k], k+1
				}
				if _, err := w.Write(withScores(l.fields, lp)); err != nil {
					return err
				}
			}
			if err := w.Flush(); err != nil {
				return err
			}
			if bad > 0 {
				return exitCode(1)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&jsonl, "jsonl", "", "JSONL file of prompts and responses (- for standard input)")
	f.BoolVar(&raw, "raw", false, "encode \"prompt\" text as it is, without the template")
	tf.register(f, true)
	tf.adapter.register(f)
	f.StringVar(&backendCF, "backend", "", "GoMLX backend config")
	computeDType.register(f, "the matrix products' dtype: float32, or bfloat16 (the graph engine on the XLA backend)")
	return cmd
}

// scoreLine is one good input line: its fields in order and its sequence.
type scoreLine struct {
	fields []jsonobj.Field
	seq    model.Sequence
}

// readScoreLines reads every line, reporting each bad one to errw as
// "line N: why" and counting it. The error is for reading failures only.
func readScoreLines(r io.Reader, a *train.Agent, raw bool, errw io.Writer) (lines []scoreLine, bad int, err error) {
	br := bufio.NewReaderSize(r, 1<<16)
	for n := 1; ; n++ {
		line, rerr := br.ReadBytes('\n')
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return nil, bad, fmt.Errorf("reading line %d: %w", n, rerr)
		}
		if t := bytes.TrimSpace(bytes.TrimPrefix(line, []byte("\uFEFF"))); len(t) > 0 {
			l, err := parseScoreLine(t, a, raw)
			if err != nil {
				bad++
				fmt.Fprintf(errw, "line %d: %v\n", n, err)
			} else {
				lines = append(lines, l)
			}
		}
		if rerr != nil {
			return lines, bad, nil
		}
	}
}

// parseScoreLine reads one line into a sequence agent a can score.
func parseScoreLine(line []byte, a *train.Agent, raw bool) (scoreLine, error) {
	l := scoreLine{}
	fields, err := jsonobj.Decode(line)
	if err != nil {
		return l, err
	}
	l.fields = fields
	get := func(key string) json.RawMessage { return jsonobj.Get(fields, key) }
	text := func(key string) (string, error) {
		var s string
		if err := json.Unmarshal(get(key), &s); err != nil {
			return "", fmt.Errorf("field %q must be a string, got %.60s", key, get(key))
		}
		return s, nil
	}
	ids := func(key string) ([]int, error) {
		var v []int
		if err := json.Unmarshal(get(key), &v); err != nil || v == nil {
			return nil, fmt.Errorf("field %q must be a list of token ids, got %.60s", key, get(key))
		}
		return v, nil
	}
	switch {
	case get("prompt_ids") != nil:
		l.seq.Prompt, err = ids("prompt_ids")
	case get("messages") != nil && raw:
		err = fmt.Errorf(`"messages" need a template; --raw takes "prompt" text`)
	case get("messages") != nil:
		msgs, merr := parseMessages(get("messages"))
		if merr != nil {
			return l, fmt.Errorf(`field "messages": %w`, merr)
		}
		l.seq.Prompt, err = a.Template.PromptMessages(a.Tok, msgs, true)
	case get("prompt") != nil:
		var q string
		if q, err = text("prompt"); err == nil {
			if raw {
				l.seq.Prompt = a.Tok.Encode(q)
			} else {
				l.seq.Prompt, err = a.Template.PromptErr(a.Tok, q)
			}
		}
	default:
		err = fmt.Errorf(`expected "prompt_ids", "messages" or "prompt"`)
	}
	if err != nil {
		return l, err
	}
	switch {
	case get("response_ids") != nil:
		l.seq.Response, err = ids("response_ids")
	case get("response") != nil:
		var r string
		if r, err = text("response"); err == nil {
			l.seq.Response = a.Tok.Encode(r)
		}
	default:
		err = fmt.Errorf(`expected "response_ids" or "response"`)
	}
	if err != nil {
		return l, err
	}
	return l, checkSequence(l.seq, a.Model.Config())
}

// checkSequence reports a sequence the model cannot score, as the line's
// error.
func checkSequence(s model.Sequence, c model.Config) error {
	if len(s.Prompt) == 0 {
		return fmt.Errorf("the prompt has no tokens")
	}
	if n := len(s.Prompt) + len(s.Response); n > c.MaxSeq+1 {
		return fmt.Errorf("%d prompt + %d response tokens exceed the model's %d positions", len(s.Prompt), len(s.Response), c.MaxSeq)
	}
	for _, part := range []struct {
		what string
		ids  []int
	}{{"prompt", s.Prompt}, {"response", s.Response}} {
		for j, id := range part.ids {
			if id < 0 || id >= c.Vocab {
				return fmt.Errorf("%s token %d is %d, outside the vocabulary [0,%d)", part.what, j, id, c.Vocab)
			}
		}
	}
	return nil
}

// withScores re-encodes a line's fields with "logprobs" and "sum_logprob"
// (replacing any it had), as one line.
func withScores(fields []jsonobj.Field, lp []float32) []byte {
	lps, _ := json.Marshal(lp)
	return jsonobj.Line(fields, jsonobj.Field{Key: "logprobs", Raw: lps}, jsonobj.Field{Key: "sum_logprob", Raw: jsonFloat(sumLogProbs(lp))})
}

func jsonFloat(v float64) []byte {
	data, _ := json.Marshal(v)
	return data
}

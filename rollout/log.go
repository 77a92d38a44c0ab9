package rollout

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/hacrl/hacrl/internal/atomicfile"
)

// LogDir is the directory of a run's rollout logs inside its output directory:
// OUT/rollouts/step-NNNNNNNN.jsonl.gz, one gzip-compressed JSONL file per
// logged step (config rollouts.every), one Record per line.
const LogDir = "rollouts"

// Record is one line of a rollout log: one response of one agent to one prompt
// of a step, and what every learner that trained on it made of it. A step's
// log holds every agent's responses, ordered by prompt, then source agent (in
// config order), then sample.
//
// Nothing in a Record is recomputed for the log: the values are those the step
// used, so a log's rewards, lengths and clip states add up to the step's
// metrics (reward/mean, length/mean, length/truncated_frac, clip/*_frac,
// retokenize/changed_frac).
type Record struct {
	// Step is the step that sampled the response, counted from 1 as in
	// metrics.jsonl (the record's step is the number of completed steps).
	Step      int    `json:"step"`
	Prompt    int    `json:"prompt"`           // index of the prompt in the step's batch
	ProblemID string `json:"problem_id"`       // the task's or dataset's problem id
	Question  string `json:"question"`         // the problem's text, before any template
	Answer    string `json:"answer,omitempty"` // the reference answer the reward checks against
	Agent     string `json:"agent"`            // the source: the agent that generated the response
	Sample    int    `json:"sample"`           // index of the response among the agent's responses to this prompt
	// PromptText is the prompt as the agent's template rendered it, special
	// tokens written as text and the BOS token left out.
	PromptText string  `json:"prompt_text"`
	Response   string  `json:"response"` // the response text, stop token excluded
	Reward     float64 `json:"reward"`
	Tokens     int     `json:"tokens"` // response length in the source's tokens, the stop token included
	// Truncated: the response hit the source's max_new_tokens without a stop token.
	Truncated bool `json:"truncated"`
	// WeightVersion is the weight version an inference server sampled the
	// response with (Rollout.WeightVersion); absent when sampled in-process.
	WeightVersion string `json:"weight_version,omitempty"`
	// Learners is one entry per learner that trained on the response, in
	// config order: every agent when the method shares rollouts, else the
	// source alone.
	Learners []LearnerUse `json:"learners"`
}

// Clip positions of an importance ratio relative to the clip range in effect
// (LearnerUse.Clip).
const (
	ClipInside = "inside" // within the range, bounds included
	ClipBelow  = "below"  // below the lower bound
	ClipAbove  = "above"  // above the upper bound
)

// LearnerUse is what one learner made of one response in its update of the step.
type LearnerUse struct {
	Learner string `json:"learner"`
	// Self: the learner generated the response itself (the GSPO/GRPO rule
	// applies); otherwise it is a cross sample (the HACPO cross rule).
	Self bool `json:"self"`
	// Advantage is the learner's advantage for the response, before ω and
	// before method.cross_advantage: positive zeroes negative cross ones.
	Advantage float64 `json:"advantage"`
	Omega     float64 `json:"omega,omitempty"` // ω(source, learner), cross samples only
	Update    int     `json:"update"`          // index m of the mini-batch (update) that trained on it
	// Ratio is the sequence importance ratio at that update: the learner's
	// current policy against the source's old one, each a mean over its own
	// tokens (token-level methods: exp of the mean log-ratio).
	Ratio float64 `json:"ratio"`
	// Clip is the ratio against the clip range in effect: the stepwise cross
	// bounds [L_m, 1] for cross samples (none, so always inside, without the
	// cross clip), the GSPO range [1 − clip_low, 1 + clip_high] for self
	// samples and for every sample of methods that treat cross samples as
	// their own. clip/self_frac and clip/cross_{lower,upper}_frac count these.
	Clip string `json:"clip"`
	// Kept is Clip == "inside": for a cross sample, the clip let its gradient
	// through (outside the bounds the cross term's gradient is zero).
	Kept bool `json:"kept"`
	// ClippedTokens counts the tokens whose ratio lies outside the clip range,
	// for token-level ratios (GRPO), whose sequence Clip is always inside.
	ClippedTokens int `json:"clipped_tokens,omitempty"`
	// RetokenizeChanged: a cross sample whose text did not survive the
	// learner's encode→decode round trip (retokenize/changed_frac counts them).
	RetokenizeChanged bool `json:"retokenize_changed,omitempty"`
	// RetokenizeCut: a cross sample re-tokenized longer than the learner's
	// response limit, cut to it.
	RetokenizeCut bool `json:"retokenize_cut,omitempty"`
	// Skipped: the update was skipped (non-finite loss or gradient,
	// on_non_finite: skip); the metrics' ratios and clip fractions leave it out.
	Skipped bool `json:"skipped,omitempty"`
}

// LogPath is the rollout log of step in the run directory out.
func LogPath(out string, step int) string {
	return filepath.Join(out, LogDir, logName(step))
}

func logName(step int) string { return fmt.Sprintf("step-%08d.jsonl.gz", step) }

// parseLogName returns the step of a rollout log's base name.
func parseLogName(name string) (int, bool) {
	s, ok := strings.CutPrefix(name, "step-")
	if !ok {
		return 0, false
	}
	if s, ok = strings.CutSuffix(s, ".jsonl.gz"); !ok {
		return 0, false
	}
	step, err := strconv.Atoi(s)
	if err != nil || step < 1 || logName(step) != name {
		return 0, false
	}
	return step, true
}

// WriteLog writes recs to path as gzip-compressed JSONL, one record per line,
// creating the directory if needed. The write is atomic (a temporary file
// renamed over path): a crash leaves the whole file or none. The bytes depend
// only on recs.
func WriteLog(path string, recs []Record) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("rollout log: %w", err)
	}
	err := atomicfile.Write(path, func(w io.Writer) error {
		zw, err := gzip.NewWriterLevel(w, gzip.DefaultCompression)
		if err != nil {
			return err
		}
		enc := json.NewEncoder(zw)
		enc.SetEscapeHTML(false) // keep <|im_start|> and friends readable
		for i := range recs {
			if err := enc.Encode(&recs[i]); err != nil {
				return fmt.Errorf("record %d: %w", i, err)
			}
		}
		return zw.Close()
	})
	if err != nil {
		return fmt.Errorf("rollout log: %w", err)
	}
	return nil
}

// ScanLog reads the rollout log at path and calls fn with each line (without
// its newline) and its record, in file order; an error from fn stops the scan
// and is returned. A file that is not gzip, a corrupt stream, a line that is
// not a record, or (for a file named step-NNNNNNNN.jsonl.gz) a record of
// another step is an error naming the file and the line.
func ScanLog(path string, fn func(line []byte, rec *Record) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("rollout log: %w", err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(bufio.NewReader(f))
	if err != nil {
		return fmt.Errorf("rollout log %s: not a gzip file: %w", path, err)
	}
	step, named := parseLogName(filepath.Base(path))
	br := bufio.NewReaderSize(zr, 1<<16)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("rollout log %s: line %d: the file is cut short: %w", path, n, err)
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("rollout log %s: line %d: %w", path, n, err)
		}
		eof := err != nil
		if eof && len(line) == 0 {
			return nil
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		var rec Record
		if err := parseRecord(line, &rec); err != nil {
			return fmt.Errorf("rollout log %s: line %d: %w", path, n, err)
		}
		if named && rec.Step != step {
			return fmt.Errorf("rollout log %s: line %d: record of step %d in the file of step %d", path, n, rec.Step, step)
		}
		if err := fn(line, &rec); err != nil {
			return err
		}
		if eof {
			return nil // a last line without a newline
		}
	}
}

// parseRecord decodes one line and checks what every record has.
func parseRecord(line []byte, rec *Record) error {
	if len(bytes.TrimSpace(line)) == 0 {
		return errors.New("empty line, want a JSON record")
	}
	if err := json.Unmarshal(line, rec); err != nil {
		return fmt.Errorf("not a rollout record: %w", err)
	}
	switch {
	case rec.Step < 1:
		return fmt.Errorf("step %d, want >= 1", rec.Step)
	case rec.Agent == "":
		return errors.New("no agent")
	case rec.Prompt < 0 || rec.Sample < 0 || rec.Tokens < 0:
		return fmt.Errorf("negative prompt, sample or tokens (%d, %d, %d)", rec.Prompt, rec.Sample, rec.Tokens)
	}
	for i, u := range rec.Learners {
		if u.Learner == "" {
			return fmt.Errorf("learners[%d]: no learner", i)
		}
		switch u.Clip {
		case ClipInside, ClipBelow, ClipAbove:
		default:
			return fmt.Errorf("learners[%d] (%s): clip %q, want inside, below or above", i, u.Learner, u.Clip)
		}
	}
	return nil
}

// ReadLog reads every record of the rollout log at path (see ScanLog).
func ReadLog(path string) ([]Record, error) {
	var recs []Record
	err := ScanLog(path, func(_ []byte, rec *Record) error {
		recs = append(recs, *rec)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return recs, nil
}

// LogSteps returns, in increasing order, the steps that have a rollout log in
// the run directory out (none when it has no rollouts directory).
func LogSteps(out string) ([]int, error) {
	ents, err := os.ReadDir(filepath.Join(out, LogDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("rollout logs: %w", err)
	}
	var steps []int
	for _, e := range ents {
		if s, ok := parseLogName(e.Name()); ok && e.Type().IsRegular() {
			steps = append(steps, s)
		}
	}
	slices.Sort(steps)
	return steps, nil
}

// PruneLogs removes from the run directory out the rollout logs of steps after
// step, and temporary files a killed write left behind: a run resumed at step
// S calls it so that it ends with the logs of an uninterrupted run.
func PruneLogs(out string, step int) error {
	dir := filepath.Join(out, LogDir)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("rollout logs: %w", err)
	}
	for _, e := range ents {
		s, ok := parseLogName(e.Name())
		if (ok && s > step) || atomicfile.IsTemp(e.Name()) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return fmt.Errorf("rollout logs: %w", err)
			}
		}
	}
	return nil
}

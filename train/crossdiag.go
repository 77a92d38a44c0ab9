package train

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"slices"

	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/hacpo"
	"github.com/hacrl/hacrl/model"
	"github.com/hacrl/hacrl/rollout"
)

// crossDiag measures what a learner's cross samples did in its step's
// updates, per source and over all sources (hacpo/doc.go decision 35 says why):
// how many had a negative advantage, what share of the cross gradient
// (with respect to the learner's log-probs, the surrogate the engine
// backpropagates) they carried, and the distribution of the learner's cross
// ratios per sequence and, where the learner's tokens are the source's, per
// token. Only updates that were applied count.
type crossDiag struct {
	names  []string
	shared []bool        // by source: its tokenizer is the learner's (the same file)
	src    []crossSource // by source; the learner's own entry stays empty
}

type crossSource struct {
	n, neg, aligned int
	grad, negGrad   float64   // Σ_t |dLoss/dlp_t| over cross samples, and over those with A < 0
	ratios          []float64 // sequence ratios s (Eq 11) at the update
	tokenRatios     []float64 // per-token ratios exp(lp_t − old_t) of aligned samples
}

// newCrossDiag starts learner k's diagnostics; sums are every agent's
// tokenizer sums (tokenizerSums).
func newCrossDiag(names []string, k int, sums []string) *crossDiag {
	d := &crossDiag{names: names, shared: make([]bool, len(names)), src: make([]crossSource, len(names))}
	for j := range sums {
		d.shared[j] = sums[k] != "" && sums[j] == sums[k]
	}
	return d
}

// tokenizerSums returns, per agent of cfg, the SHA-256 of the tokenizer file
// it loads ("" when it names none or the file cannot be read): agents share
// a tokenizer, and their token ids mean the same text, when their sums are
// equal and not "". Ids alone can coincide between two tokenizers on short
// responses.
func tokenizerSums(cfg *config.Config) []string {
	sums := make([]string, len(cfg.Agents))
	for i, ac := range cfg.Agents {
		path := tokenizerPath(ac)
		if path == "" {
			continue
		}
		if b, err := os.ReadFile(path); err == nil {
			h := sha256.Sum256(b)
			sums[i] = hex.EncodeToString(h[:])
		}
	}
	return sums
}

// add records mini-batch results: items[n] is sample n's view item, seqs its
// loss, grad and lp its gradient and current log-prob rows.
func (d *crossDiag) add(items []*rollout.Item, samples []hacpo.Sample, seqs []hacpo.SeqLoss, grad, lp [][]float32, decode func([]int) string) {
	for n, sm := range samples {
		if sm.Self || sm.Masked {
			continue
		}
		c := &d.src[sm.Source]
		c.n++
		g := 0.0
		for _, v := range grad[n] {
			g += math.Abs(float64(v))
		}
		c.grad += g
		if sm.Advantage < 0 {
			c.neg++
			c.negGrad += g
		}
		c.ratios = append(c.ratios, seqs[n].Ratio)
		if it := items[n]; d.shared[sm.Source] && sharesTokens(it, decode) {
			c.aligned++
			for t, old := range it.Rollout.OldLogProbs {
				c.tokenRatios = append(c.tokenRatios, math.Exp(float64(lp[n][t])-float64(old)))
			}
		}
	}
}

// sharesTokens reports whether a cross sample's tokens in the learner's
// tokenization (the source's tokenizer too) are the source's own, meaning the
// same text, so that each token's log-prob under the learner and under the
// source can be compared: a retokenization that merges or splits
// differently, or a cut, is not.
func sharesTokens(it *rollout.Item, decode func([]int) string) bool {
	ro := it.Rollout
	if !slices.Equal(it.Response, ro.Tokens) || len(ro.OldLogProbs) != len(ro.Tokens) {
		return false
	}
	toks := ro.Tokens
	if ro.Stopped && len(toks) > 0 {
		toks = toks[:len(toks)-1]
	}
	return decode(toks) == ro.Text
}

// metrics writes the step's diagnostics into v: per source (suffix
// /<source>) and over every source (no suffix).
func (d *crossDiag) metrics(v map[string]float64) {
	var all crossSource
	for j, c := range d.src {
		if c.n == 0 {
			continue
		}
		c.write(v, "/"+d.names[j])
		all.n += c.n
		all.neg += c.neg
		all.aligned += c.aligned
		all.grad += c.grad
		all.negGrad += c.negGrad
		all.ratios = append(all.ratios, c.ratios...)
		all.tokenRatios = append(all.tokenRatios, c.tokenRatios...)
	}
	if all.n > 0 {
		all.write(v, "")
	}
}

func (c *crossSource) write(v map[string]float64, suffix string) {
	v["cross/neg_frac"+suffix] = float64(c.neg) / float64(c.n)
	if c.grad > 0 {
		v["cross/neg_grad_frac"+suffix] = c.negGrad / c.grad
	}
	v["cross/aligned_frac"+suffix] = float64(c.aligned) / float64(c.n)
	quantiles(v, "cross/ratio_", suffix, c.ratios)
	quantiles(v, "cross/token_ratio_", suffix, c.tokenRatios)
}

// quantiles writes the 1st, 10th, 50th, 90th and 99th percentiles of x
// (linear interpolation between order statistics, numpy's default) as
// prefix+"p01"+suffix and so on; nothing when x is empty. It sorts x.
func quantiles(v map[string]float64, prefix, suffix string, x []float64) {
	if len(x) == 0 {
		return
	}
	slices.Sort(x)
	for _, q := range []struct {
		name string
		p    float64
	}{{"p01", 0.01}, {"p10", 0.1}, {"p50", 0.5}, {"p90", 0.9}, {"p99", 0.99}} {
		v[prefix+q.name+suffix] = quantile(x, q.p)
	}
}

// quantile is the p-quantile of sorted x by linear interpolation.
func quantile(x []float64, p float64) float64 {
	h := p * float64(len(x)-1)
	lo := int(math.Floor(h))
	if lo+1 >= len(x) {
		return x[len(x)-1]
	}
	return x[lo] + (h-float64(lo))*(x[lo+1]-x[lo])
}

// learnerStart scores learner a's cross samples with its policy at the
// start of the step, before any update, for the cross bounds that need it
// (hacpo.Settings.NeedsLearnerStart): their mean log-probs by pool index
// (NaN for self samples), and per source the anchor of adaptive bounds
// (hacpo.CrossAnchor), written as cross/anchor/<source> and with the median
// start ratio cross/start_ratio_p50/<source>.
func (r *Run) learnerStart(ctx context.Context, a *Agent, view *rollout.View, v map[string]float64) (start, anchor []float64, err error) {
	items := view.Items
	start = make([]float64, len(items))
	var idx []int
	for i := range items {
		start[i] = math.NaN()
		if !items[i].Self {
			idx = append(idx, i)
		}
	}
	chunk := r.cfg.Batch.MicroBatch
	if chunk <= 0 {
		chunk = max(r.cfg.Batch.MiniBatch, 1)
	}
	for lo := 0; lo < len(idx); lo += chunk {
		part := idx[lo:min(lo+chunk, len(idx))]
		seqs := make([]model.Sequence, len(part))
		for n, i := range part {
			seqs[n] = model.Sequence{Prompt: items[i].Prompt, Response: items[i].Response}
		}
		sc, err := a.Model.Score(ctx, seqs, false)
		if err != nil {
			return nil, nil, fmt.Errorf("start-of-step scoring of the cross samples: %w", err)
		}
		for n, i := range part {
			start[i] = hacpo.MeanLogProb(sc.LogProbs[n])
		}
	}
	ratios := make([][]float64, len(r.names))
	for _, i := range idx {
		ro := items[i].Rollout
		ratios[ro.Source] = append(ratios[ro.Source], math.Exp(start[i]-ro.OldMeanLogProb()))
	}
	anchor = make([]float64, len(r.names))
	for j, rs := range ratios {
		if len(rs) == 0 {
			anchor[j] = 1
			continue
		}
		if anchor[j], err = hacpo.CrossAnchor(rs); err != nil {
			return nil, nil, fmt.Errorf("source %s: %w", r.names[j], err)
		}
		v["cross/start_ratio_p50/"+r.names[j]] = quantile(sortedCopy(rs), 0.5)
		if r.algo.CrossBounds == hacpo.AdaptiveBounds {
			v["cross/anchor/"+r.names[j]] = anchor[j]
		}
	}
	return start, anchor, nil
}

func sortedCopy(x []float64) []float64 {
	c := slices.Clone(x)
	slices.Sort(c)
	return c
}

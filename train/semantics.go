package train

import (
	"fmt"

	"github.com/hacrl/hacrl/config"
	"github.com/hacrl/hacrl/hacpo"
	"github.com/hacrl/hacrl/rollout"
)

// seqLengths gives, per agent and in the order of bySource, each response's
// token count as its source sampled it: the source's rendered prompt
// (promptLens[source][prompt] tokens) plus the response, stop token
// included. The original semantics balances the step's batch by these
// lengths, as verl's balance_batch does (hacpo/doc.go decision 24); V1 uses
// only their number.
func seqLengths(pool *rollout.Pool, bySource [][]int, promptLens [][]int) [][]int {
	out := make([][]int, len(bySource))
	for j, idx := range bySource {
		out[j] = make([]int, len(idx))
		for n, i := range idx {
			ro := &pool.Rollouts[i]
			out[j][n] = promptLens[j][ro.Prompt] + len(ro.Tokens)
		}
	}
	return out
}

// checkSemantics refuses, before any work, a run whose steps the original
// semantics cannot split over its hacpo.OriginalRanks ranks: each learner's
// batch (every agent's responses when the method shares them) must be a
// multiple of the rank count.
func checkSemantics(s hacpo.Settings, cfg *config.Config) error {
	if !s.IsOriginal() {
		return nil
	}
	b := cfg.Batch
	perAgent := b.PromptsPerStep * b.ResponsesPerPrompt * s.ResponsesMultiplier
	n := perAgent
	if s.SharesRollouts {
		n *= len(cfg.Agents)
	}
	if n%hacpo.OriginalRanks != 0 {
		return fmt.Errorf("%s: original balances each learner's %d sequences per step over %d ranks and needs a multiple of %d (batch.prompts_per_step × batch.responses_per_prompt = %d × %d per agent)",
			cfg.Where("method.semantics"), n, hacpo.OriginalRanks, hacpo.OriginalRanks, b.PromptsPerStep, b.ResponsesPerPrompt)
	}
	return nil
}

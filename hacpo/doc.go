// Package hacpo is the HACPO algorithm core (Heterogeneous Agent Collaborative
// Policy Optimization, arXiv 2603.02604) and the single-agent baselines it is
// compared with, as pure functions over float64: no model, tokenizer, tensors or
// files. The specification is ../shared/docs/hacpo-paper.md ("spec" below).
//
// # What it computes
//
// For n >= 1 agents sharing a verifiable reward, one training step is:
//
//  1. CapabilityTracker.Update with every agent's rewards of the step (Eq 9), then
//     ω(a, b) = clamp(P̂a/P̂b, 0.1, 10) from CapabilityTracker.Omega (Eq 8).
//  2. For each learner k and each prompt's joint group of responses,
//     Settings.Advantages: A_i = (R_i − μ̂^(k)) / (σ_joint + ε) with the
//     capability-weighted baseline μ̂^(k) = mean_i ω(k, src_i)·R_i (Eq 6–7).
//  3. Settings.PlanStep: k's sequences cut into mini-batches, self first
//     (PlanMiniBatches) or, under the original semantics, in verl's balanced
//     order (PlanBalanced).
//  4. For each mini-batch m, the engine computes k's per-token log-probs and calls
//     Settings.MiniBatchLoss(m, samples, logProbs), which returns the loss and
//     dLoss/dlp per token; the engine backpropagates Σ_b Σ_t w[b][t]·lp[b][t] and
//     takes one optimizer step.
//
// Per sequence (spec §2.5, §2.7 step 5e), with the loss the mean over the B
// sequences of the mini-batch:
//
//	self:  −min(s·A, clip(s, 1−ε_low, 1+ε_high)·A)           s = exp(mean lp − mean old lp)   (GSPO)
//	cross: −clip(s, L_m, 1)·sg(clip(s, L_m, 1))^α·ω(src,k)·A  s = exp(mean lp − source's mean old lp)
//	       L_m = min(1, 1 − δ + m·δ_step)
//	plus KLCoef × the token-mean k3 KL to the reference model, on self samples only.
//
// with the loss the mean over the mini-batch's sequences: the paper's. Decisions
// 27–34 add verl's and TRL's options to every method: the loss aggregation, the
// advantage's std scope (Settings.AdvantageStd), CISPO's self rule, the KL
// estimator and KL in the reward, an entropy bonus, masked truncated responses,
// DAPO's overlong penalty and dynamic sampling, rewards in any range, and the
// rollout correction for samplers that are not the trainer.
//
// Settings.SelfTerm, CrossTerm, TokenTerm and KL3 are the per-sequence (per-token)
// scalar pieces, each returning its value and derivative; MiniBatchLoss is built
// from them. Methods are Settings values: Preset("hacpo" | "gspo" | "gspo2x" |
// "grpo" | "naive" | "no-adv" | "no-omega" | "no-stepwise" | "no-cross-clip" |
// "hacpo-capable" | "dapo" | "dr_grpo" | "cispo"),
// editable field by field (α, δ, δ_step, …) and checked by Validate. Single-agent
// methods (GSPO, GSPO×2, GRPO) run through the same calls with self samples only.
//
// # Decisions where the paper is ambiguous (spec section in brackets)
//
//  1. Capability per step [§2.1, §7 items 1, 13]: over all of the agent's responses
//     in the step (all prompts × all its responses), not per prompt. Metric
//     PositiveRate (fraction of rewards > 0, [code-v1]) by default, MeanReward
//     selectable. Each per-step value and the window mean are floored at 1e-8; an
//     agent with no history has capability 1.0. An agent with no response in a step
//     is an error (there is no accuracy to record).
//  2. The window includes the current step [§7 item 14, App. D.1]: the loop calls
//     Update with the step's rewards before computing advantages. Early in training
//     the window mean runs over the values available.
//  3. ω is clamped to [0.1, 10] [§6.4 item 1]; ω(a, a) = 1 exactly. Warm-up: ω = 1 while
//     Steps <= WarmupSteps, i.e. for the first WarmupSteps training steps ([code-v1]
//     semantics; default 0 = off). The baseline uses ω(k, j) = clamp(P̂k/P̂j) and the
//     update ω(j, k) = clamp(P̂j/P̂k); with the symmetric clamp these are reciprocal.
//  4. Eq 7's 1/(nG) is the number of responses of the group the learner uses, so
//     groups with unequal counts per source (a failed sample) are fine: the mean runs
//     over all responses present, each weighted by ω(k, source) (1 for its own)
//     [§2.1, §7 item 18]. The std is the sample std (N − 1) of the same responses'
//     raw rewards [§7 item 2]. A group of one response is divided by 1 + ε (and a
//     group with no usable response yields advantages 0) [code-v1].
//  5. Edge cases [§2.1, code-orig, code-v1]: if all rewards of the group are
//     identical (exact equality) the baseline is the plain mean, so every advantage
//     is 0 (0/ε). If the capability-weighted baseline exceeds 1 it is replaced by the
//     learner's own mean reward in the group; if the learner has no response in that
//     group (possible only with unequal counts) the plain joint mean is used instead
//     ([code-v1] raises an error there). The guard applies only to a
//     capability-weighted baseline: the plain mean of GSPO/GRPO/Naive/no-adv is never
//     replaced. With NormalizeStd off the denominator is 1 with no ε [code-v1].
//  6. The advantage of every response, own or not, uses learner k's baseline and the
//     raw reward in the numerator; ω(source, k) multiplies only the cross term of the
//     loss (Eq 10) [§2.2, §7 item 3].
//  7. Ratios [§6.4 items 5, 9]: each side of the cross ratio is the mean log-prob over
//     its own tokenization (learner's current over the retokenized text; source's old
//     over its own tokens). Every log-ratio (sequence or token) is clamped to ±10 on
//     both sides [code-v1]; outside the clamp the ratio is constant (zero gradient).
//  8. Cross clip [§2.4, §6.4 item 4, §7 items 6–7]: a hard clamp to [L_m, 1] (bounds
//     inclusive, as torch.clamp): outside it the term's value is constant and its
//     gradient exactly zero, whatever the sign of A; no PPO min. The α factor uses the
//     clipped, detached ratio, so the gradient inside is sg(s)^(α+1)·ω·A per unit of
//     mean log-prob (Prop D.6). A clamped sequence still counts in the mean's
//     denominator ("discarded" = zero gradient, spec §7 item 7).
//  9. Stepwise bound [§2.4, §7 items 4–5]: m is the 0-based mini-batch (optimizer
//     step) index within this learner's step, reset every step; L_m = min(1, 1 − δ +
//     m·δ_step), computed (1 − δ) + m·δ_step. δ is the distance from 1: the paper's
//     Table 5 "δ = 0.8" is the bound 1 − δ, i.e. CrossDelta = 0.2.
//  10. Self term [§7 item 8]: standard GSPO min(s·A, clip(s, 1 − 3e-4, 1 + 4e-4)·A).
//     Inside the clip range (inclusive) the gradient is −A·s; outside it flows only
//     when the unclipped branch is the min.
//  11. Aggregation [§2.5, §7 items 7, 9]: "seq-mean-token-mean" for every method: each
//     sequence's term is already a token mean (sequence ratio; or the mean of the
//     per-token terms for GRPO), and the mini-batch loss is their sum over the B
//     sequences of the mini-batch divided by B (self, cross and clamped alike). There
//     is no extra weight between J_homo and J_hete.
//  12. KL [§2.5, §6.2, §7 item 11]: verl's low_var_kl k3 per token, exp(d) − d − 1
//     with d = ref − lp clamped to ±20 and the value capped at 10 (zero gradient where
//     a clamp is active); on self samples only; token mean per sequence; summed over
//     the self sequences and divided by B, the number of all sequences of the
//     mini-batch (verl's seq-mean-token-mean with the global batch size, as the
//     verl-V1 port runs it). Coefficient 0.001 in every preset; 0 turns it off.
//     Loss.KL is reported before the coefficient; Loss.Total = Policy + KLCoef·KL.
//  13. Mini-batches [§6.4 item 6, §7 items 10, 18]: self samples first, then each
//     other agent by increasing index, each in the loop's order; no shuffle. The size
//     is given in sequences (the paper: 64 prompts × 8 = 512); the last mini-batch
//     may be smaller (with 128 × 8 per agent and 512 it never is). So with n = 2
//     the cross samples of a learner land in m = 2, 3 (bounds 0.85, 0.875), as in
//     [code-v1]; this is Semantics "v1", the default, and [code-orig]'s
//     balance_batch order is Semantics "original" (decisions 23–26).
//  14. Old log-probs [§7 item 19]: for a self sample, the learner's own old policy on
//     the same tokens; for a cross sample, the source's old policy on its own tokens,
//     both recomputed by the engine before any update of the step.
//  15. Baselines and ablations [§4.4, §5.3–5.6, §7 item 12]: GSPO = one agent, sequence
//     ratio, clip 3e-4/4e-4; GSPO×2 = GSPO with ResponsesMultiplier 2 (2G responses;
//     with the mini-batch size in sequences it makes as many updates as 2-agent
//     HACPO; set the multiplier to n to match n-agent HACPO, method.responses_multiplier
//     in a config); GRPO = token ratio, clip
//     0.2/0.28, per-token PPO min (verl's dual clip c = 3 is available as DualClip but
//     off); Naive = shared pool, plain joint mean and std, ω = 1, α = 0, the GSPO clip
//     for every sample (CrossAsSelf); no-adv = plain joint mean baseline; no-omega = ω
//     out of the update, kept in the baseline; no-stepwise = static [1 − δ, 1];
//     no-cross-clip = no cross clamp at all (the α factor then uses the raw ratio).
//     All presets keep the KL 0.001 and seq-mean-token-mean.
//  16. A method that does not share rollouts ignores other agents' responses: they get
//     advantage 0 and are left out of the group statistics and of the plan, and
//     MiniBatchLoss rejects a cross sample. Token-level ratios cannot be combined with
//     shared rollouts (cross samples are retokenized; there are no per-token old
//     log-probs), which Validate reports.
//  17. Statistics [§6.3 compute_hacpo_loss]: self clip fraction = fraction of self
//     units (sequences; tokens for GRPO) whose ratio lies outside [1 − ε_low, 1 + ε_high],
//     as [code-v1] logs it; cross lower/upper fractions = cross sequences below L_m /
//     above 1 (the self range for Naive; none when there is no cross clamp). Stats are
//     sums and counts so they add up over mini-batches and steps.
//  18. Inputs are checked: a sequence with no tokens, a non-finite reward, advantage,
//     log-prob, ω or reference log-prob is an error naming the sample (the lowest
//     index when several are bad). A self sample's optional OldLogProbs must average
//     to its OldMeanLogProb (within 1e-5 relative).
//  19. Stop-gradient [§2.3, Prop D.6]: Loss.Total and Term.Value are the objective's
//     value, c^(1+α) for an unclamped cross term; the returned gradient treats the
//     factor sg(c)^α as a constant. A finite difference of Total therefore matches the
//     gradient only with that factor held fixed (the tests do so); for α > 0 the
//     derivative of the value itself is (1+α) times the gradient on cross terms.
//  20. Beyond the paper, one diagnostic switch: Settings.CrossPositiveOnly zeroes the
//     term of every cross sample with a negative advantage, so that a run learns from
//     the other agents' successes only. It exists to separate the two halves of the
//     cross signal when a learner degrades (Naive's PPO-min already drops most
//     negative cross samples, since their ratio sits below 1 − ε_low); no preset
//     sets it.
//  21. Rewards from outside [§7]: a user's own reward (a command or an HTTP endpoint,
//     docs/reward.md) lies in the range it declares (reward.range, [0, 1] by
//     default, the range the paper's verifiable rewards have); the reward client
//     enforces it, and decision 32 says how the baseline and the capability use it.
//     Partial credit for wrong answers would count them as successes under
//     capability: accuracy unless reward.success_above says where success starts
//     (or capability: mean_reward is chosen; the examples do). This package only
//     refuses non-finite rewards (decision 18).
//  22. Temperature 0 samples greedily (argmax) — in rollouts as in evaluation. Then an
//     agent's G responses to a prompt are identical, so the group says no more than
//     one response would; the setting is for inspection and evaluation rather than
//     training, and is accepted in both because it means exactly what it says.
//  23. Semantics [§6.4 items 6, 8]: Settings.Semantics switches mini-batch membership
//     and loss aggregation between [code-v1] ("v1", the default; "" means v1, so
//     configs written before the switch keep their meaning and hash) and
//     [code-orig] ("original", whose runs produced the paper's numbers). Nothing
//     else changes with it: [code-orig]'s one-sided log-ratio clamp (§6.4 item 9)
//     and its EOS handling on retokenization (item 7) stay as decisions 7 and the
//     rollout package make them, since neither is membership or aggregation (and
//     the clamp's lower side acts only below a ratio of e^−10, where a term's
//     gradient is at most e^−10·|A|·ω anyway). balance_batch partitions over OriginalRanks = 8
//     data-parallel ranks, the GPUs of the authors' runs (n_gpus_per_node = 8 in
//     [code-orig]'s launch script): the partition count decides the membership, so
//     it is fixed to the paper's rather than to this machine's. The step's batch
//     and the mini-batch size must then be multiples of 8 (verl asserts the same);
//     the train loop checks this when the run starts.
//  24. balance_batch [§6.2 trainer flow 3, §6.4 item 6] (PlanBalanced,
//     BalancedPartitions): the batch is every agent's responses concatenated,
//     agent 0 first, each in the loop's order (prompt, then sample), as [code-orig]
//     concatenates the main and aux batches; a method that does not share rollouts
//     balances the learner's own responses alone, as a single-model verl run does.
//     A sequence's length is its prompt plus response tokens in its source's own
//     tokenization, stop token included (verl sums the attention mask before any
//     swap to the learner's tokenization), so the partition is one per step and the
//     same for every learner. The partition is verl's get_seqlen_balanced_partitions
//     with equal_size: Karmarkar–Karp's largest differencing method, seeded with
//     groups of k consecutive items in (length, index) order, merging the two
//     states of largest spread, largest set with smallest. Ties break as verl's:
//     sets by (sum, count, items in joining order); states by spread, then the
//     larger largest set first. These orders are total (no two states or sets
//     compare equal), so the result does not depend on the priority queue's layout;
//     the tests check it by hand and it matched verl's Python on 400 random cases.
//     Indices are sorted within each partition, partitions kept in the final
//     state's order (decreasing sum).
//  25. Mini-batches under "original" [§6.2 trainer flow 8–9, dp_actor]: rank r
//     takes the r-th of 8 equal chunks of the balanced order and cuts it into
//     per-rank mini-batches of mini_batch/8 sequences (verl's data.split); update
//     m is the m-th piece of every rank, and L_m applies by the update a sample
//     lands in. For learner k the balanced order is first rotated left by the
//     responses of agents 0..k−1: with n = 2 and equal counts this is exactly
//     [code-orig]'s "second half first" reorder before the aux model's update,
//     and for n > 2 (where [code-orig] has no counterpart) it is the same rule,
//     which would put the learner's own block first if nothing were balanced.
//     Because indices are sorted within a rank, agent 0's responses come first in
//     every chunk: learner 0 meets its cross samples mostly in the last updates
//     (as in v1) and learner 1 mostly in the first ones, under the loosest
//     bounds (with the paper's sizes and random lengths, all 512 and about 480–495
//     of the 512 sequences of m = 0 and m = 1 are cross, under 0.8 and 0.825).
//  26. Aggregation under "original" [§6.2 dp_actor, §6.4 item 8]: the KL is a
//     token mean over the self tokens of the mini-batch, Σ_self Σ_t k3 / Σ_self
//     |y| (0 when the mini-batch has no self sample, as verl's masked mean), and
//     GRPO's token-level policy term a token mean over all its tokens (verl's
//     default loss_agg_mode token-mean, which [code-orig]'s vanilla loss keeps).
//     The sequence-level policy term stays the sequence mean of decision 11
//     (mapo_clip forces seq-mean-token-mean; GSPO is defined per sequence, spec
//     §1.3). verl 0.5 takes these token means per micro-batch of 8 sequences per
//     GPU and averages the micro-batches and ranks with equal weight; that layout
//     is a memory setting and is not reproduced: the token mean is over the whole
//     mini-batch, which is what token-mean is meant to be and what batch.micro_batch
//     leaves unchanged here. Loss.Seqs and Stats keep their per-sequence values.
//
// # Options beyond the paper (verl's and TRL's), and how they meet the cross terms
//
//  27. Loss aggregation [verl agg_loss, volcengine/verl b178a3cd; TRL grpo_trainer
//     _compute_loss, huggingface/trl f2cd5771]: Settings.LossAgg weighs each
//     sequence's token-mean term V_b (n_b tokens) in a mini-batch of B sequences and
//     N tokens: seq-mean-token-mean V_b/B (decision 11, the default, every paper
//     preset); token-mean n_b·V_b/N (DAPO, TRL's default "dapo"); seq-mean-token-sum
//     n_b·V_b/B; seq-mean-token-sum-norm n_b·V_b/(B·L) with L the learner's
//     max_new_tokens (Dr. GRPO). For the last, verl divides by L alone and TRL's
//     dr_grpo by B·L; we follow TRL, so that its scale does not grow with the
//     mini-batch and stays comparable with the other modes. Masked samples are in
//     neither B nor N (verl's seq_mask). The KL is aggregated with the policy's
//     weights, cross samples counting as 0 (decision 12 for the default). Cross
//     samples enter like any sequence, with n_b their length in the learner's own
//     tokenization — the tokens the learner's gradient flows through; their term is
//     still the sequence-level cross term. The original semantics keeps decision
//     26's mix and refuses another LossAgg.
//  28. Dynamic sampling [DAPO §3.2; verl recipe/dapo, 246cac4c]: a prompt is kept
//     when KeepsPrompt says its rewards can teach something: for a method that
//     shares rollouts, when the joint group's task rewards are not all equal (else
//     every learner's advantages are 0, decision 5); for one that does not, when
//     some agent's own rewards are not all equal (with one agent: DAPO's rule). The
//     task's reward before any shaping decides (DAPO filters on accuracy; the
//     overlong penalty would separate otherwise equal groups). The train loop samples
//     rounds of batch.prompts_per_step fresh prompts and keeps the first kept
//     prompts in order up to prompts_per_step, like verl's batch[:train_batch_size];
//     after MaxSampleRounds rounds (3 by default; DAPO's recipe allows 10 rounds of
//     three batches each) it trains on the prompts it kept, where verl raises an
//     error, and reports dynamic/kept_prompts. The capability tracker sees every
//     response sampled in the step, dropped ones included: P̂ estimates accuracy,
//     and dropping the all-right and all-wrong groups would pull it toward 1/2.
//  29. Entropy bonus [verl dp_actor entropy_coeff]: −EntropyCoef × the learner's
//     token entropy, aggregated with the policy term's weights (decision 27), on
//     self samples only (verl's on all samples, which with one agent are the same):
//     the entropy regularises the distribution the learner samples from, and
//     another agent's text is not where the learner explores. The engine computes the
//     entropy and its gradient (Loss.EntropyWeights); Loss.Total leaves it out.
//  30. CISPO [MiniMax-M1, arXiv 2506.13585; verl compute_policy_loss_cispo; TRL
//     loss_type cispo]: SelfRule cispo replaces PPO's min by
//     −sg(clip(r, 1 − ε_low, 1 + ε_high))·A·log π, so a clipped unit keeps its
//     gradient, weighted by the clipped ratio. At the token level r is the token's
//     ratio and log π the token's; at the sequence level (with shared rollouts) r is
//     the sequence ratio s and log π the mean log-prob. Term.Value is −clip(r)·A and
//     Term.Grad −clip(r)·A: the gradient of the surrogate, whose value is not
//     otherwise meaningful (as decision 19). ε_low = 1 means no lower bound. The
//     cispo preset follows MiniMax-M1 (no lower bound) and TRL's recommended cap of
//     5 (ε_high = 4), token-mean, no KL; verl's defaults (0.2/0.2) are a
//     clip_low/clip_high away. Cross samples keep the cross rule of CrossRule;
//     Naive's CrossAsSelf uses the self rule, CISPO included.
//  31. KL estimators and KL in the reward [verl kl_penalty; Schulman, "Approximating
//     KL divergence"]: KLEstimator k1 = lp − ref, k2 = ½(lp − ref)², k3 = decision
//     12's (verl's kl, mse and low_var_kl; k1 and k2 unclamped as in verl).
//     KLInReward subtracts KLCoef·Σ_t KLToken(old_t, ref_t) from each of the
//     learner's own rewards before its advantages, as verl's apply_kl_penalty with
//     GRPO summing token rewards; the loss then has no KL term. It is refused with
//     shared rollouts: the penalty measures how far the response's author has
//     drifted from its own reference, and putting it into a reward other learners
//     are trained on would regularise them toward someone else's reference. The
//     coefficient is fixed (verl's fixed controller; no adaptive one).
//  32. Rewards outside [0, 1]: SetRewards(min, max, success) declares the task
//     reward's range before shaping and the success threshold (the config's
//     reward.range and reward.success_above; [0, 1] and 0 by default). min is the
//     reward of a plain failure, where Eq 7's weighted mean is anchored:
//     μ̂ = min + (1/n)·Σ_i ω(k, src_i)·(R_i − min), which is Eq 7 for min = 0 and
//     moves with any shift of the rewards (Eq 7 itself does not: it divides by n,
//     not Σω, so with rewards in [−1, 1] a capable agent's failures would pull the
//     baseline down by ω). The guard replaces a baseline above max. Capability
//     accuracy counts rewards > success; mean_reward averages R − min. Shaping
//     (the overlong penalty, the KL in the reward) may take a reward below min:
//     such a response pulls the weighted baseline down by its ω-weighted shortfall,
//     like any reward. The capability tracker sees the rewards of the pool, the
//     overlong penalty included (the rewards the agents exchange, one process or
//     many) but not the KL in the reward, which is the learner's own: with
//     capability accuracy, a right answer stays a success while its shaped reward
//     is above success, i.e. unless the penalty factor is >= 1 and the answer
//     reaches that far into the buffer (DAPO's factor 1: only at max_new_tokens).
//  33. Rollout correction [verl TIS b8dc5377 and rollout_corr_helper; Yao et al.,
//     "Your efficient RL framework secretly brings you off-policy RL training"]:
//     when a response's sampler is not the trainer (an inference server; bf16
//     sampling weights), its sampler's log-probs differ from the trainer's old ones,
//     and the ratio against the old policy no longer corrects for where the sample
//     came from. RolloutWeights gives truncated importance weights from the two,
//     min(exp(old − sampler), C) per token, or per sequence with the sum (sequence)
//     or mean (geometric) of the log-ratios, each clamped to ±20 first as verl does;
//     they multiply the sample's policy term and its gradient, not its KL (verl
//     multiplies pg_losses). A sequence-level term with token weights weighs each
//     token's share of the gradient. For a cross sample the weight is its source's:
//     the sample came from the source's sampler, and min(π_src,old/π_src,sampler, C)
//     is the factor between the cross ratio's denominator and the true sampling
//     probability; token weights cannot follow a retokenized sample, so the token
//     level is refused with shared rollouts (as decision 16's token ratio). A
//     response sampled in-process in float32 has weight 1: its sampler is the
//     trainer. The cap C (rollout_is_cap, 2 as verl's threshold) must be >= 1.
//  34. The remaining options and the cross terms: AdvantageStd batch divides by the
//     std of every reward of the step the learner uses (BatchStd) — with shared
//     rollouts every agent's, the joint group's population extended to the step —
//     the mean staying per group (TRL's scale_rewards "batch"); the baseline is
//     still decision 4's. MaskTruncated masks every response cut at its source's
//     max_new_tokens, for every learner: a cross sample's truncation is its
//     source's (TRL's mask_truncated_completions; DAPO's overlong filtering); it
//     still counts in its group's advantages. The overlong penalty (DAPO §3.4,
//     verl's DAPO reward manager) is the source's: a response's length in its
//     source's tokens against its source's max_new_tokens, and every learner sees
//     the shaped reward. Nothing here changes ω, α, the stepwise bound L_m or the
//     cross clamp: a cross term is decision 8's, then weighted by its rollout
//     correction (decision 33) and aggregated (decision 27).
//
// Beyond the paper. The long grid (docs/results/long-grid.md, 200 steps, five
// seeds) found two failures, and the following variants are the hypotheses
// docs/results/beyond-hacpo.md tests. A variant becomes a preset only where
// that page's grid finds its interval over all agents against HACPO clear of
// zero; one did (35).
//
//  35. Negative cross advantage only from capable sources (CrossNegativeCapable,
//     method.cross_advantage: capable). A cross sample with A < 0 counts only
//     when ω(source, learner) = P̂_source/P̂_learner ≥ 1 (ω's clamp contains 1,
//     so clamped and unclamped ω agree on the comparison; during ω's warm-up
//     every source counts). Reason: the harm HACPO does to the stronger agent
//     of the size pair disappears when negative cross advantages are dropped
//     (cross_advantage: positive, +0.075 avg@4, 5/5 seeds) or when the
//     capability-weighted baseline is (no-adv, +0.074): it comes from the
//     learner being pushed away from a weaker agent's failures. A failure of
//     an agent at least as capable is evidence about the task the learner
//     shares; a weaker agent's failure is mostly evidence about that agent —
//     its sequence ratio under the learner is low, and lowering the
//     probability of a sequence the learner would rarely write moves mass
//     elsewhere in ways the sample does not inform. Unlike positive, the
//     weaker agent still learns from the stronger one's failures, and among
//     three agents the middle one from the strongest's. It is the preset
//     hacpo-capable: over five seeds of 200 steps its avg@4 against HACPO is
//     +0.014 [+0.007, +0.021] over the long grid's six agents and +0.023
//     [+0.014, +0.032] over the complementary pair and the three agents
//     (95% intervals; the larger agent +0.065 and +0.094, 5/5 seeds each).
//     It stays out of "hacpo": the paper's method is what "hacpo" names.
//  36. Cross bounds set from the learner (CrossBounds, method.cross_bounds).
//     Between agents with complementary skills the learner's cross ratio is
//     0.05–0.09, below every bound 1 − δ + m·δ_step, so every cross sample is
//     clamped and nothing transfers; without the clamp the weaker agent
//     collapses. The fixed bound measures the distance between two agents,
//     which the learner cannot change within a step, where a trust region
//     should bound how far the learner moves. Two ways to make it the
//     learner's, both needing its start-of-step log-probs of the cross samples
//     (one more forward pass over them per learner and step):
//     adaptive keeps HACPO's term and scales the lower bound by a = min(1,
//     median of the learner's start ratios on that source's samples), per
//     source and step (the issue's "bounds from the learner's own
//     distribution of cross ratios"; a ≥ 1, agents as alike as the paper's,
//     is HACPO exactly). The median, not a low quantile, so that about half
//     of a distant source's samples can still fall below the bound: the clamp
//     keeps its role of removing the samples the learner finds least likely.
//     The exponential weight sg(c)^α is unchanged, so a distant sample enters
//     with weight c^(1+α). decoupled is decoupled PPO [Hilton, Cobbe, Schulman,
//     "Batch size-invariance for policy optimization", NeurIPS 2022]: the
//     proximal policy is the learner's own at the start of the step and the
//     behaviour policy the source's, so the clipped ratio is
//     ρ = π_θ/π_learner,start (sequence level, the self clip range: cross
//     samples move the learner no further per step than its own do) and the
//     off-policy correction π_learner,start/π_source enters as a detached
//     weight truncated at 1 (HACPO's upper bound 1: never trust another
//     agent's sample more than the learner's own), raised to α, times ω. At
//     the step's start the gradient is −ω·min(1, s)^α·A, which a fixed clip
//     zeroes for s < 1 − δ.
//  37. Cross diagnostics (train, every method that shares rollouts): per
//     learner and source, cross/neg_frac (share of the cross samples used in
//     applied updates with A < 0), cross/neg_grad_frac (their share of Σ_t
//     |dLoss/dlp_t| over cross samples: the gradient with respect to the
//     learner's log-probs, which the engine backpropagates; a parameter-space
//     norm would need a backward pass per sample), the 1st/10th/50th/90th/99th
//     percentiles of the sequence ratio s at the update (cross/ratio_p*) and,
//     over the samples whose learner tokens are the source's own ids and text
//     and whose two agents load the same tokenizer file (cross/aligned_frac;
//     ids alone coincide between tokenizers on short responses), of the
//     per-token ratio exp(lp_t − old_t)
//     (cross/token_ratio_p*); without the /<source> suffix, over every source.
//     They read the loss's outputs and change no number of the run.
//
// # Numbers and determinism
//
// Everything inside is float64; float32 log-probs are widened on entry and the
// gradient is rounded to float32 once, on exit (MiniBatchLoss64 keeps float64).
// Sequence means use MeanLogProb (a fixed summation order); an engine should compute
// OldMeanLogProb with it too, so that an unchanged policy gives a ratio of exactly 1.
// MiniBatchLoss spreads large mini-batches (>= 2·16384 tokens) over GOMAXPROCS
// goroutines, one block of sequences each, and reduces the per-sequence results in
// sequence order: the output is bit-identical for any number of workers.
package hacpo

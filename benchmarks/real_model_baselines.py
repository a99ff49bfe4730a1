"""Untuned accuracy of a real model on our envs: greedy, single pass, with standard errors and per-role diagnostics.

    .venv/bin/python benchmarks/real_model_baselines.py [--model smollm2-135m-instruct] [--dtype bfloat16]
        [--suites gsm8k,math500,gsm8k-default,math500-default,booking,code] [--n 200] [--n-default 50]
        [--n-episodes 20] [--max-new-tokens 256] [--booking-tokens 64] [--threads 1]

Suites (each one fresh policy on the base, LoRA adapters at their initial value B = 0, so every output is
the untuned base model's; a single LoRA target keeps peft's per-call overhead small and changes nothing):

- ``gsm8k`` / ``math500``: ``marft/MathSolo-v0`` with ``problems=/work/shared/data/gsm8k/test.jsonl``
  (``.../math/math500_test.jsonl``) and ``profile="general-v0"``, on ``--n`` problems: the env's fixed
  held-out subset, i.e. the first ``n`` of a permutation of the file drawn with
  ``marft_agents.rollout.evaluation.HELDOUT_SEED`` (what ``marft eval`` would pick);
- ``gsm8k-default`` / ``math500-default``: the same with the default profile, on the first ``--n-default``
  problems of the same subset (a paired contrast);
- ``booking``: ``marft/Booking-v0`` and ``code``: ``marft/CodeRepairSolo-v0``, their default profiles,
  ``--n-episodes`` episodes (Booking has no held-out split: seeds ``HELDOUT_SEED + i``; CodeRepairSolo
  its test split); Booking's responses (one JSON tool call each) at ``--booking-tokens``, CodeRepair's
  (a whole function) at ``--max-new-tokens``.

Each row reports accuracy and mean return with their standard errors (``evaluation.summarize``), the
env's per-role diagnostics, the share of responses that hit the token limit without an end-of-turn
token (answers cut short), tokens generated, wall and CPU seconds. Results go to
``benchmarks/results/real_model_baselines.json``; ``--samples K`` keeps K whole transcripts per suite.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import torch

import marft_envs
from marft_agents import LaMASPolicy, RolloutEngine, Sampling, load_base
from marft_agents.rollout.evaluation import (  # internal: the pieces of evaluate, run one by one
    HELDOUT_SEED,  # the held-out seeds, as marft eval picks them
    eval_plan,
    summarize,
    transcript,
)

RESULTS = Path(__file__).parent / "results"
DATA = Path("/work/shared/data")
GSM8K, MATH500 = DATA / "gsm8k" / "test.jsonl", DATA / "math" / "math500_test.jsonl"
# name -> (env id, env kwargs, which count option, which token option)
SUITES = {
    "gsm8k": ("marft/MathSolo-v0", {"problems": str(GSM8K), "profile": "general-v0"}, "n", "max_new_tokens"),
    "math500": ("marft/MathSolo-v0", {"problems": str(MATH500), "profile": "general-v0"}, "n", "max_new_tokens"),
    "gsm8k-default": ("marft/MathSolo-v0", {"problems": str(GSM8K)}, "n_default", "max_new_tokens"),
    "math500-default": ("marft/MathSolo-v0", {"problems": str(MATH500)}, "n_default", "max_new_tokens"),
    "booking": ("marft/Booking-v0", {}, "n_episodes", "booking_tokens"),
    "code": ("marft/CodeRepairSolo-v0", {}, "n_episodes", "max_new_tokens"),
}


def run_suite(
    model_name: str, dtype: torch.dtype, env_id: str, env_kwargs: dict, n: int, max_new_tokens: int, n_envs: int, samples: int
) -> dict:
    """Greedy single-pass episodes of ``env_id`` as ``marft eval`` plays them, plus cut-off and cost figures."""
    plan = eval_plan(env_id, env_kwargs, rounds=1)
    envs = [marft_envs.make(env_id, **plan.env_kwargs) for _ in range(min(n, n_envs))]

    def options_of(i):
        return None

    if plan.heldout:
        options = envs[0].heldout_options(n, HELDOUT_SEED)
        n = len(options)

        def options_of(i):
            return options[i]

    model, tokenizer = load_base(model_name, dtype=dtype)
    # the adapters start as an exact no-op (B = 0): one target is enough to read the untuned base
    policy = LaMASPolicy(model, tokenizer, envs[0].possible_agents, lora_targets=("q_proj",))
    rollout = RolloutEngine(policy, Sampling(temperature=0.0, max_new_tokens=max_new_tokens))
    c0, t0 = time.process_time(), time.perf_counter()
    with torch.no_grad():
        episodes = rollout.collect(envs, range(n), seed_of=lambda i: HELDOUT_SEED + i, options_of=options_of)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    out = summarize(episodes)
    steps = [s for e in episodes for s in e.steps]
    eos = policy.eos_token_id

    def cut(s):
        return len(s.response) >= max_new_tokens and eos not in s.response

    for agent, role in out["roles"].items():
        mine = [s for s in steps if s.agent == agent]
        role["cut_share"] = sum(map(cut, mine)) / len(mine)
        role["responses"] = len(mine)
    out.update(
        {
            "env": env_id,
            "env_kwargs": env_kwargs,
            "heldout": plan.heldout,
            "max_new_tokens": max_new_tokens,
            "cut_share": sum(map(cut, steps)) / len(steps),
            "responses": len(steps),
            "tokens": sum(len(s.response) for s in steps),
            "wall_s": wall,
            "cpu_s": cpu,
            "generate_calls": rollout.generate_calls,
        }
    )
    # per episode, compact: enough to pair runs on the same problems (index i is the same problem in every run)
    out["per_episode"] = [
        {
            "index": e.index,
            "solved": e.solved,
            "return": sum(s.reward for s in e.steps),
            "tokens": [len(s.response) for s in e.steps],
            "cut": [cut(s) for s in e.steps],
        }
        for e in episodes
    ]
    if samples:
        out["samples"] = [transcript(e) for e in episodes[:samples]]
    return out


def table(rows: dict[str, dict]) -> str:
    head = (
        f"{'suite':<16} {'n':>4} {'accuracy ± se':>15} {'mean return ± se':>18} {'cut':>6} {'tok/resp':>8} "
        f"{'tokens':>7} {'wall s':>7} {'cpu/wall':>8}"
    )
    lines = [head, "-" * len(head)]
    for name, r in rows.items():
        lines.append(
            f"{name:<16} {r['episodes']:>4} {r['accuracy']:>7.1%} ± {r['accuracy_stderr']:<5.1%} "
            f"{r['mean_return']:>8.3f} ± {r['mean_return_stderr']:<7.3f} {r['cut_share']:>6.1%} "
            f"{r['tokens'] / r['responses']:>8.1f} {r['tokens']:>7} {r['wall_s']:>7.0f} "
            f"{r['cpu_s'] / r['wall_s']:>8.2f}"
        )
        for agent, role in r["roles"].items():
            extra = ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in role.items())
            lines.append(f"    {agent}: {extra}")
    lines.append(
        "accuracy: the env's solved flag, greedy, one attempt; se: standard error over episodes; "
        "cut: responses that hit the token limit without an end-of-turn token"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16"])
    parser.add_argument("--suites", default="gsm8k,math500,gsm8k-default,math500-default,booking,code")
    parser.add_argument("--n", type=int, default=200, help="problems per GSM8K / MATH-500 suite (general-v0)")
    parser.add_argument("--n-default", type=int, default=50, help="problems per default-profile contrast suite")
    parser.add_argument("--n-episodes", type=int, default=20, help="episodes of Booking-v0 / CodeRepairSolo-v0")
    parser.add_argument("--max-new-tokens", type=int, default=256, help="GSM8K / MATH-500 response limit")
    parser.add_argument(
        "--booking-tokens",
        type=int,
        default=64,
        help="Booking response limit (one JSON tool call; its prompts are long, so this is its cost)",
    )
    parser.add_argument("--n-envs", type=int, default=64, help="envs stepped together (the batch size)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--out", default=str(RESULTS / "real_model_baselines.json"))
    args = parser.parse_args(argv)
    names = [s.strip() for s in args.suites.split(",") if s.strip()]
    unknown = [s for s in names if s not in SUITES]
    if unknown:
        raise SystemExit(f"--suites: unknown {unknown}; use some of {list(SUITES)}")
    if args.threads:
        torch.set_num_threads(args.threads)
    dtype = getattr(torch, args.dtype)
    out_path = Path(args.out)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    result = {
        "benchmark": "real_model_baselines",
        "model": args.model,
        "dtype": args.dtype,
        "torch_threads": torch.get_num_threads(),
        "heldout_seed": HELDOUT_SEED,
        "args": vars(args),
        "suites": {},
    }
    started = time.perf_counter()
    for name in names:
        env_id, kwargs, count, tokens = SUITES[name]
        n, limit = getattr(args, count), getattr(args, tokens)
        print(f"[{name}] {env_id} {kwargs} n={n} max_new_tokens={limit} ...", flush=True)
        row = run_suite(args.model, dtype, env_id, kwargs, n, limit, args.n_envs, args.samples)
        result["suites"][name] = row
        print(table({name: row}).splitlines()[2:][0], flush=True)
        result["wall_s"] = time.perf_counter() - started
        out_path.write_text(json.dumps(result, indent=2))  # after each suite: a killed run keeps what it had
    print()
    print(f"model {args.model}, {args.dtype}, {torch.get_num_threads()} thread(s), greedy")
    print(table(result["suites"]))
    print(f"written to {out_path} ({result['wall_s']:.0f} s)")
    return result


if __name__ == "__main__":
    main()

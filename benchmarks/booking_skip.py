"""Booking-v0: generating only the actions the env will read (``RolloutEngine(skip_ignored=)``), on and off.

    .venv/bin/python benchmarks/booking_skip.py [--model smollm2-135m-instruct] [--episodes 8]
        [--rounds 2] [--max-new-tokens 96] [--repeats 3] [--threads 2] [--temperature 0.0]

``marft/Booking-v0``'s coordinator plans every round who acts; a worker left out of the plan (or
every worker, when the plan is not valid) is still asked for an action, which the env ignores
(``needs_action`` is False). With ``skip_ignored`` the rollout engine sends ``""`` for it without
generating; without, it generates as before. Both sides play the same episodes (the same seeds),
greedy by default, so the coordinator's plans should be the same and the mean return identical —
the script reports whether it was, and whether every action generated with skipping on got the same
text with it off (greedy, but in batches of another size, which may round differently). Per side and per interleaved repeat (the order alternates):
generated tokens, generate calls and wall / CPU seconds per episode; the ratio off / on is taken per
pair and summarised by the median and min-max. Results go to ``benchmarks/results/booking_skip.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from roofline import cpu  # noqa: E402

ENV = "marft/Booking-v0"


def side(policy, envs, skip: bool, args) -> dict:
    """One collection of ``args.episodes`` episodes with skipping on or off: tokens, calls, seconds, returns."""
    from marft_agents import RolloutEngine, Sampling

    rollout = RolloutEngine(policy, Sampling(temperature=args.temperature, max_new_tokens=args.max_new_tokens), skip_ignored=skip)
    torch.manual_seed(0)
    wall, cpu0 = time.perf_counter(), time.process_time()
    with torch.no_grad():
        episodes = rollout.collect(envs, range(args.episodes), seed_of=lambda i: 10_000 + i)
    wall, cpu_s = time.perf_counter() - wall, time.process_time() - cpu0
    steps = [s for e in episodes for s in e.steps]
    return {
        "skip_ignored": skip,
        "wall_s_per_episode": wall / args.episodes,
        "cpu_s_per_episode": cpu_s / args.episodes,
        "generated_tokens_per_episode": sum(len(s.response) for s in steps) / args.episodes,
        "prompt_tokens_generated_from_per_episode": sum(len(s.prompt) for s in steps if not s.skipped) / args.episodes,
        "skipped_steps_per_episode": sum(s.skipped for s in steps) / args.episodes,
        "steps_per_episode": len(steps) / args.episodes,
        "generate_calls": rollout.generate_calls,
        "mean_return": sum(s.reward for s in steps) / args.episodes,
        "texts": {(s.episode, s.round, s.agent): s.text for s in steps if not s.skipped},
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2-135m-instruct")
    p.add_argument("--episodes", type=int, default=8)
    p.add_argument("--rounds", type=int, default=2, help="Booking-v0 max_rounds")
    p.add_argument("--max-new-tokens", type=int, default=96)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "booking_skip.json")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)

    import marft_envs
    from marft_agents import TrainConfig, build_policy

    kwargs = {"max_rounds": args.rounds}
    envs = [marft_envs.make(ENV, **kwargs) for _ in range(args.episodes)]
    policy = build_policy(TrainConfig(model=args.model, env=ENV, env_kwargs=kwargs, threads=args.threads), envs[0].possible_agents)
    runs: list[tuple[dict, dict]] = []
    for r in range(args.repeats):
        order = (True, False) if r % 2 == 0 else (False, True)
        got = {skip: side(policy, envs, skip, args) for skip in order}
        runs.append((got[True], got[False]))
        print(
            f"repeat {r}: on {got[True]['wall_s_per_episode']:.1f} s/episode ({got[True]['generated_tokens_per_episode']:.0f} tokens), "
            f"off {got[False]['wall_s_per_episode']:.1f} s/episode ({got[False]['generated_tokens_per_episode']:.0f} tokens)",
            flush=True,
        )

    def ratio(key: str) -> dict:
        xs = [off[key] / on[key] for on, off in runs]
        return {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}

    same_return = all(on["mean_return"] == off["mean_return"] for on, off in runs)
    # every action generated with skipping on is generated with it off too: are they the same text?
    same_texts = all(text == off["texts"].get(key) for on, off in runs for key, text in on["texts"].items())
    result = {
        "cpu": cpu(),
        "threads": args.threads,
        "env": ENV,
        "env_kwargs": kwargs,
        "model": args.model,
        "episodes": args.episodes,
        "temperature": args.temperature,
        "max_new_tokens": args.max_new_tokens,
        "runs": [
            {"on": {k: v for k, v in on.items() if k != "texts"}, "off": {k: v for k, v in off.items() if k != "texts"}} for on, off in runs
        ],
        "off_over_on": {k: ratio(k) for k in ("wall_s_per_episode", "cpu_s_per_episode", "generated_tokens_per_episode")},
        "same_mean_return": same_return,
        "same_generated_texts": same_texts,
    }
    print(json.dumps({k: result[k] for k in ("off_over_on", "same_mean_return", "same_generated_texts")}, indent=1))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

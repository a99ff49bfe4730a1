"""What a MathChain run's held-out accuracy is made of: per level, and whether the reasoner finished.

    .venv/bin/python benchmarks/demo_breakdown.py runs/demo [more run folders] [--base embedded] [--n 300]

For each run folder (its latest checkpoint) and each ``--base`` model (untuned), plays the greedy
2-agent chain on the same held-out problems as ``marft eval`` and prints one line: team accuracy,
the share of episodes in which the reasoner wrote at least as many lines as the worked solution has
steps ("finished"), the accuracy on those, and the accuracy per problem level (1-4). The embedded
model was pre-trained to stop early sometimes (``docs/agents.md``, "The embedded model"); this
shows how much of a run's gain is the reasoner finishing its work.
"""

from __future__ import annotations

import argparse
import os
from collections import defaultdict

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

import marft_envs  # noqa: E402
from marft_agents import RolloutEngine, Sampling, TrainConfig, build_policy, policy_from_run  # noqa: E402
from marft_agents.rollout.evaluation import HELDOUT_SEED  # noqa: E402
from marft_envs.tasks.math.synthetic import LEVELS  # noqa: E402

ENV = "marft/MathChain-v0"


def _pct(xs: list[bool]) -> float:
    return 100.0 * sum(xs) / len(xs) if xs else float("nan")


@torch.no_grad()
def breakdown(policy, n: int, env_kwargs: dict, max_new_tokens: int) -> dict:
    """Greedy chain on ``n`` held-out problems: accuracy, finished share, accuracy by level."""
    envs = [marft_envs.make(ENV, **{**env_kwargs, "split": "test", "rounds": 1}) for _ in range(n)]
    problems = envs[0].problems.heldout(n, seed=HELDOUT_SEED)
    engine = RolloutEngine(policy, Sampling(temperature=0.0, max_new_tokens=max_new_tokens))
    episodes = engine.collect(envs, range(len(problems)), seed_of=lambda i: HELDOUT_SEED + i, options_of=lambda i: {"problem": problems[i]})
    by_level, finished, solved_if_finished = defaultdict(list), [], []
    for e in episodes:
        problem = problems[e.index]
        reasoner = next(s for s in e.steps if s.agent == "reasoner_0")
        done = len(reasoner.text.strip().splitlines()) >= len(problem.solution.splitlines())
        finished.append(done)
        if done:
            solved_if_finished.append(e.solved)
        by_level[problem.level].append(e.solved)
    return {
        "accuracy": _pct([e.solved for e in episodes]),
        "finished": _pct(finished),
        "accuracy_when_finished": _pct(solved_if_finished),
        "by_level": {level: _pct(by_level[level]) for level in LEVELS},
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("runs", nargs="*", help="run folders of MathChain-v0 runs (their latest checkpoint)")
    p.add_argument("--base", action="append", default=[], help="an untuned model: embedded, a folder or a Hub id")
    p.add_argument("--n", type=int, default=300, help="held-out problems (default %(default)s, as the demo)")
    args = p.parse_args()
    if not args.runs and not args.base:
        p.error("give at least one run folder or --base MODEL")
    torch.set_num_threads(min(2, torch.get_num_threads()))
    print(f"{'':40} accuracy  finished  acc. if finished  by level {' / '.join(map(str, LEVELS))}")
    for untuned, name in [*((True, b) for b in args.base), *((False, r) for r in args.runs)]:
        if untuned:
            config = TrainConfig(model=name)
            policy = build_policy(config, marft_envs.make(ENV).possible_agents)
        else:
            policy, config = policy_from_run(name)
            if config.env != ENV:
                raise SystemExit(f"{name} trained on {config.env}; this breakdown is for {ENV}")
        r = breakdown(policy, args.n, config.env_kwargs, config.max_new_tokens)
        levels = " / ".join(f"{v:.1f}" for v in r["by_level"].values())
        label = f"{name} (untuned)" if untuned else name
        print(f"{label[-40:]:40} {r['accuracy']:7.1f}%  {r['finished']:7.1f}%  {r['accuracy_when_finished']:15.1f}%  {levels}")


if __name__ == "__main__":
    main()

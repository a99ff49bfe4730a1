"""Learning on a real model: MARFT vs a supervised control on SmolLM2-135M-Instruct, from the same start.

    .venv/bin/python benchmarks/real_model.py [--seeds 0] [--updates 10] [--out DIR]
    .venv/bin/python benchmarks/real_model.py choose            # only the untuned candidates
    .venv/bin/python benchmarks/real_model.py marft --seed 0    # one phase at a time
    .venv/bin/python benchmarks/real_model.py sft --seed 0 --seconds 1800
    .venv/bin/python benchmarks/real_model.py report

Phases (the default runs them in order and writes ``results/real_model/``):

1. **choose** — before any RL run, the setting is picked by one rule stated here: the first candidate
   in ``CANDIDATES`` (easiest last, so the hardest setting that qualifies wins) whose untuned greedy
   held-out accuracy on the 2-agent chain lies in [20 %, 60 %]. The candidates are all
   ``marft/MathChain-v0`` with the general-model role prompts (``profile="general-v0"``); only the
   problems differ. ``choice.json`` records every candidate's accuracy and the pick.
2. **marft** — ``marft train`` (``algo=marft``) on the chosen setting: LoRA on every linear layer (the
   library's defaults: lr 3e-4, temperature 0.7), ``--updates`` updates of 16 episodes, fp32, one
   torch thread; held-out greedy accuracy on every distinct test problem (``EVAL_N``) before and after.
3. **sft** — the control at equal wall time: the same LoRA adapters, from the same untuned start,
   trained by supervised learning for as many seconds as MARFT's updates took (the sum of its
   ``time/update_s``): the reasoner on each training problem's worked solution (``12+7=19``), the actor
   on ``\\boxed{gold}`` after the gold working, batches of 16 per agent, AdamW at MARFT's lr. Then the
   same held-out evaluation. Its adapters are saved as a run folder, ``sft_s<seed>_run``, that
   ``marft train init_from=...`` starts RL from (``marft_agents/training/init_from.py``).
4. **report** — ``table.md`` (accuracy before/after with standard errors, the change, per-role
   diagnostics, wall times) and ``curves.png`` (MARFT's training solve rate per update).

Everything runs on CPU with one torch thread per process; ``marft`` and ``sft`` for one seed can run
side by side (``sft --seconds`` fixes the budget ahead of time). A full run is about an hour a seed
here. The model must be fetched once (``marft models fetch smollm2-135m-instruct``).
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

OUT = Path(__file__).parent / "results" / "real_model"
MODEL = "smollm2-135m-instruct"
ENV = "marft/MathChain-v0"
PROFILE = "general-v0"
CANDIDATES = ("synthetic:1", "synthetic:0")  # hardest first; the first in [LOW, HIGH] is the setting
LOW, HIGH = 0.20, 0.60
EVAL_N = 112  # synthetic:0 has 112 distinct test problems: evaluate on all of them
MAX_NEW_TOKENS = 48
EPISODES = 16


def env_kwargs(problems: str) -> dict:
    return {"profile": PROFILE, "problems": problems}


def untuned_policy(problems: str, threads: int = 1):
    import marft_envs
    from marft_agents import TrainConfig, build_policy

    config = TrainConfig(model=MODEL, env=ENV, env_kwargs=env_kwargs(problems), threads=threads)
    return build_policy(config, marft_envs.make(ENV, **config.env_kwargs).possible_agents)


def held_out(policy, problems: str) -> dict:
    import torch

    from marft_agents import evaluate

    with torch.no_grad():
        return evaluate(policy, ENV, env_kwargs(problems), EVAL_N, max_new_tokens=MAX_NEW_TOKENS, samples=4)


# ---- phases ---------------------------------------------------------------------------------------


def choose(out: Path) -> dict:
    """Untuned held-out accuracy of each candidate until one lies in [LOW, HIGH]; writes choice.json."""
    import torch

    torch.set_num_threads(1)
    rows, pick = [], None
    for problems in CANDIDATES:
        started = time.perf_counter()
        result = held_out(untuned_policy(problems), problems)
        rows.append(
            {
                "problems": problems,
                "accuracy": result["accuracy"],
                "stderr": result["accuracy_stderr"],
                "episodes": result["episodes"],
                "roles": result["roles"],
                "wall_s": time.perf_counter() - started,
            }
        )
        print(f"  untuned {problems}: {result['accuracy']:.1%} ± {result['accuracy_stderr']:.1%}", flush=True)
        if LOW <= result["accuracy"] <= HIGH:
            pick = problems
            break
    if pick is None:
        raise SystemExit(f"no candidate in [{LOW:.0%}, {HIGH:.0%}]: {rows}")
    choice = {"rule": f"first of {list(CANDIDATES)} with untuned accuracy in [{LOW}, {HIGH}]", "candidates": rows, "problems": pick}
    (out / "choice.json").write_text(json.dumps(choice, indent=2))
    return choice


def run_marft(out: Path, problems: str, seed: int, updates: int) -> dict:
    """MARFT through the trainer (the same path as ``marft train``); returns its summary."""
    from marft_agents import TrainConfig, train

    config = TrainConfig(
        model=MODEL,
        env=ENV,
        env_kwargs=env_kwargs(problems),
        algo="marft",
        seed=seed,
        updates=updates,
        episodes_per_update=EPISODES,
        max_new_tokens=MAX_NEW_TOKENS,
        eval_episodes=EVAL_N,
        eval_every=0,
        eval_rounds=0,
        checkpoint_every=10,
        run_dir=str(out / f"marft_s{seed}"),
        threads=1,
    )
    return train(config, overwrite=True, progress=False)


def sft_examples(problems: str, seed: int, n: int) -> list[tuple[dict, str, dict, str]]:
    """``n`` training problems as (reasoner observation, gold working, actor observation, boxed gold)."""
    import marft_envs

    env = marft_envs.make(ENV, **env_kwargs(problems))
    reasoner, actor = env.possible_agents
    examples = []
    for k in range(n):
        env.reset(seed=seed * 1_000_003 + k)
        working = env.problem.solution
        seen = env.observe(reasoner)
        env.step({reasoner: working})
        examples.append((seen, working, env.observe(actor), f"\\boxed{{{env.problem.answer}}}"))
    return examples


def run_sft(
    out: Path,
    problems: str,
    seed: int,
    seconds: float | None,
    lr: float = 3e-4,
    updates: int = 0,
    threads: int = 1,
    steps: int | None = None,
) -> dict:
    """The supervised control: both adapters trained on gold targets for ``seconds``, then evaluated.

    ``seconds=None`` runs beside a MARFT run of ``updates`` updates: it trains until that run has
    logged all its updates and for as long as they took (the sum of their ``time/update_s``).
    ``steps`` instead trains exactly that many steps (the same batches on any machine; ``seconds`` unused).
    """
    import torch

    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    policy = untuned_policy(problems, threads)
    reasoner, actor = policy.adapters
    tok = policy.tokenizer
    optimizers = {a: torch.optim.AdamW(policy.parameters(a), lr=lr, weight_decay=0.0) for a in (reasoner, actor)}
    pool = sft_examples(problems, seed, 4096)
    started, step, losses = time.perf_counter(), 0, []
    while (step < steps) if steps is not None else not _budget_spent(out, seed, seconds, updates, time.perf_counter() - started):
        batch = [pool[(step * EPISODES + i) % len(pool)] for i in range(EPISODES)]
        for agent, (obs_at, target_at) in ((reasoner, (0, 1)), (actor, (2, 3))):
            prompts = [policy.prompt(b[obs_at]) for b in batch]
            targets = [tok(b[target_at], add_special_tokens=False)["input_ids"] + [policy.eos_token_id] for b in batch]
            logp, _, mask = policy.score(prompts, targets, agent, temperature=1.0)  # (B, R) each
            loss = -(logp * mask).sum() / mask.sum()
            optimizers[agent].zero_grad()
            loss.backward()
            optimizers[agent].step()
            losses.append((agent, step, loss.item()))
        step += 1
    wall = time.perf_counter() - started
    from marft_agents import TrainConfig
    from marft_agents.training.init_from import save_adapters_run

    # the adapters as a run folder, so RL can start from them: marft train init_from=<out>/sft_s<seed>_run
    save_adapters_run(
        out / f"sft_s{seed}_run", TrainConfig(model=MODEL, env=ENV, env_kwargs=env_kwargs(problems), threads=1, seed=seed), policy
    )
    after = held_out(policy, problems)
    result = {
        "seed": seed,
        "seconds": seconds if seconds is not None or steps is not None else marft_seconds(out, seed),
        "wall_s": wall,
        "steps": step,
        "lr": lr,
        "losses": losses,
        "eval_after": after,
    }
    (out / f"sft_s{seed}.json").write_text(json.dumps(result, indent=2, default=str))
    return result


def _budget_spent(out: Path, seed: int, seconds: float | None, updates: int, elapsed: float) -> bool:
    if seconds is not None:
        return elapsed >= seconds
    path = out / f"marft_s{seed}" / "metrics.jsonl"
    rows = path.read_text().splitlines() if path.is_file() else []
    return len(rows) >= updates and elapsed >= marft_seconds(out, seed)


# ---- report ---------------------------------------------------------------------------------------


def marft_seconds(out: Path, seed: int) -> float:
    rows = [json.loads(x) for x in (out / f"marft_s{seed}" / "metrics.jsonl").read_text().splitlines()]
    return sum(r["time/update_s"] for r in rows)


def report(out: Path, seeds: list[int]) -> str:
    choice = json.loads((out / "choice.json").read_text())
    setting = (
        f"Setting: `{ENV}`, `problems={choice['problems']}`, `profile={PROFILE}`, model `{MODEL}` "
        f"(Q4_1 dequantisation), greedy held-out accuracy on {EVAL_N} test problems."
    )
    lines = [
        setting,
        "",
        "| run | seed | before | after | change | reasoner own | actor if reasoner right / wrong | training time |",
        "|---|---|---|---|---|---|---|---|",
    ]

    def fmt(r):
        return f"{r['accuracy']:.1%} ± {r['accuracy_stderr']:.1%}"

    for seed in seeds:
        summary_path = out / f"marft_s{seed}" / "summary.json"
        if summary_path.is_file():
            s = json.loads(summary_path.read_text())
            b, a = s["eval_before"], s["eval_after"]
            lines.append(_row("MARFT", seed, b, a, fmt, marft_seconds(out, seed)))
        sft_path = out / f"sft_s{seed}.json"
        if sft_path.is_file() and summary_path.is_file():
            r = json.loads(sft_path.read_text())
            lines.append(_row("SFT control", seed, json.loads(summary_path.read_text())["eval_before"], r["eval_after"], fmt, r["wall_s"]))
    table = "\n".join(lines)
    (out / "table.md").write_text(table + "\n")
    _plot(out, seeds)
    return table


def _row(name, seed, before, after, fmt, seconds) -> str:
    roles = after.get("roles", {}).get("reasoner_0", {})
    change = after["accuracy"] - before["accuracy"]
    se = (before["accuracy_stderr"] ** 2 + after["accuracy_stderr"] ** 2) ** 0.5
    return (
        f"| {name} | {seed} | {fmt(before)} | {fmt(after)} | {change:+.1%} (±{se:.1%}) | "
        f"{roles.get('own_accuracy', float('nan')):.1%} | {roles.get('answer_accuracy_when_right', float('nan')):.0%}"
        f" / {roles.get('answer_accuracy_when_wrong', float('nan')):.0%} | {seconds / 60:.0f} min |"
    )


def _plot(out: Path, seeds: list[int]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    for seed in seeds:
        path = out / f"marft_s{seed}" / "metrics.jsonl"
        if path.is_file():
            rows = [json.loads(x) for x in path.read_text().splitlines()]
            solved = [r["train/solved"] for r in rows]
            trail = [statistics.fmean(solved[max(0, i - 4) : i + 1]) for i in range(len(solved))]
            ax.plot(solved, alpha=0.3, label=f"seed {seed}")
            ax.plot(trail, label=f"seed {seed}, 5-update mean")
    ax.set_xlabel("update")
    ax.set_ylabel("training solve rate (T 0.7)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "curves.png", dpi=120)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("phase", nargs="?", default="all", choices=("all", "choose", "marft", "sft", "report"))
    p.add_argument("--seeds", default="0", help="comma-separated seeds (phase all)")
    p.add_argument("--seed", type=int, default=0, help="the seed (phases marft, sft)")
    p.add_argument("--updates", type=int, default=10)
    p.add_argument(
        "--seconds",
        type=float,
        default=None,
        help="sft: training budget (default: as long as the MARFT run's --updates updates took, waiting for them if it runs alongside)",
    )
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    seeds = [int(s) for s in args.seeds.split(",")]

    def chosen():
        return json.loads((args.out / "choice.json").read_text())["problems"]

    if args.phase in ("all", "choose"):
        choose(args.out)
    if args.phase == "marft":
        run_marft(args.out, chosen(), args.seed, args.updates)
    if args.phase == "sft":
        run_sft(args.out, chosen(), args.seed, args.seconds, updates=args.updates)
    if args.phase == "all":
        for seed in seeds:
            run_marft(args.out, chosen(), seed, args.updates)
            run_sft(args.out, chosen(), seed, marft_seconds(args.out, seed), updates=args.updates)
    if args.phase in ("all", "report"):
        print(report(args.out, seeds))
    return 0


if __name__ == "__main__":
    sys.exit(main())

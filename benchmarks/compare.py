"""The training algorithms side by side on the embedded MATH task, with equal generation budgets.

    .venv/bin/python benchmarks/compare.py [--updates 100] [--workers 2] [--seeds 0,1,2] [--quick]

Every run is ``marft_agents.training.trainer.train`` in its own subprocess with one torch thread
(``--workers`` at a time: two 1-thread processes beat one 2-thread process on these machines), the
embedded model, ``--updates`` updates and **64 generated responses per update**: 32 two-agent
episodes for the chains and CORY, 64 one-agent episodes for single-agent PPO, 32 two-solver
episodes for IPPO/MAPPO. Runs:

- the main contrast, every seed: MARFT on ``MathChain-v0`` vs single-agent PPO on ``MathSolo-v0``;
- one seed each: token-level MARFT, MARFT with the sequential trust-region update, multi-agent GRPO
  (groups of 4), IPPO and MAPPO (2-solver ``MathDebate-v0``, one round), CORY (``MathCORY-v0``);
- a learning-rate sweep (one seed): CORY and PPO at 3e-4, 1e-3 and 3e-3 (the claim: CORY stays
  stable where PPO collapses);
- the control: more supervised training of the same checkpoint, on whole solutions, for the median
  MARFT wall time.

Each run reports held-out greedy accuracy (200 problems) before, best (over the evaluations every
``updates // 4``) and final, KL(pi || reference) per action on 64 sampled training episodes after
training (the mean of ``log pi - log pi_ref`` summed over each action's tokens, actions sampled from
pi), wall time, and for chains the per-role diagnostics (the reasoner's own accuracy; the actor's
accuracy when the reasoner was right vs wrong). Writes ``results/compare/``: ``table.md``,
``results.json``, ``curves.png``, ``reward_vs_kl.png`` and ``lr_sweep.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

OUT = Path(__file__).parent / "results" / "compare"
EVAL_N = 200
KL_EPISODES = 64
CHAIN, SOLO, DEBATE, CORY_ENV = "marft/MathChain-v0", "marft/MathSolo-v0", "marft/MathDebate-v0", "marft/MathCORY-v0"


def run_specs(seeds: list[int], updates: int) -> list[dict]:
    """Every training run of the benchmark: a name, a group, and ``TrainConfig`` overrides."""
    common = {
        "updates": updates,
        "eval_episodes": EVAL_N,
        "eval_rounds": 0,
        "eval_every": max(updates // 4, 1),
        "checkpoint_every": updates,
        "threads": 1,
    }
    chain = {**common, "env": CHAIN, "episodes_per_update": 32}
    solo = {**common, "env": SOLO, "episodes_per_update": 64, "algo": "ppo"}
    debate = {**common, "env": DEBATE, "env_kwargs": {"n_agents": 2, "rounds": 1}, "episodes_per_update": 32}
    cory = {**common, "env": CORY_ENV, "episodes_per_update": 32, "algo": "cory"}
    specs = []
    for s in seeds:
        specs.append({"name": f"marft/s{s}", "group": "MARFT (action)", "overrides": {**chain, "seed": s}})
        specs.append({"name": f"ppo/s{s}", "group": "PPO (single agent)", "overrides": {**solo, "seed": s}})
    s = seeds[0]
    specs += [
        {"name": "marft_token", "group": "MARFT (token)", "overrides": {**chain, "seed": s, "algo": "marft_token"}},
        {"name": "marft_seq", "group": "MARFT + sequential", "overrides": {**chain, "seed": s, "marft.sequential.enabled": True}},
        {"name": "grpo", "group": "GRPO", "overrides": {**chain, "seed": s, "algo": "grpo"}},
        {"name": "ippo", "group": "IPPO (debate)", "overrides": {**debate, "seed": s, "algo": "ippo"}},
        {"name": "mappo", "group": "MAPPO (debate)", "overrides": {**debate, "seed": s, "algo": "mappo"}},
        {"name": "cory", "group": "CORY", "overrides": {**cory, "seed": s}},
    ]
    for lr in (1e-3, 3e-3):  # 3e-4 is the default, run above
        specs.append({"name": f"sweep/cory_lr{lr:g}", "group": "sweep", "overrides": {**cory, "seed": s, "cory.lr": lr}})
        specs.append({"name": f"sweep/ppo_lr{lr:g}", "group": "sweep", "overrides": {**solo, "seed": s, "ppo.lr": lr}})
    return specs


# ---- one run, in a subprocess ---------------------------------------------------------------------


def worker(spec: dict, out: Path) -> None:
    """Train one run into ``out/<name>`` and add ``kl.json`` (or do the SFT control)."""
    import torch

    torch.set_num_threads(1)
    run_dir = out / spec["name"]
    if spec.get("kind") == "sft":
        result = sft_control(spec["seconds"], spec["seed"])
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "sft.json").write_text(json.dumps(result, indent=2))
        return
    from marft_agents import from_dict, train

    config = from_dict({**spec["overrides"], "run_dir": str(run_dir)})  # dotted keys set nested fields
    train(config, progress=False, quiet=True)
    (run_dir / "kl.json").write_text(json.dumps({"kl_per_action": kl_to_reference(str(run_dir))}))


def kl_to_reference(run_dir: str) -> float:
    """Mean over sampled actions of ``sum_t log pi - log pi_ref`` (k1 estimate of KL(pi || ref) per action)."""
    import marft_envs
    from marft_agents import RolloutEngine, Sampling, policy_from_run

    policy, config = policy_from_run(run_dir)
    envs = [marft_envs.make(config.env, **config.env_kwargs) for _ in range(32)]
    engine = RolloutEngine(policy, Sampling(config.temperature, config.max_new_tokens))
    episodes = engine.collect(envs, range(10**6, 10**6 + KL_EPISODES))
    steps = [s for e in episodes for s in e.steps]
    kls = []
    for start in range(0, len(steps), 64):
        mb = steps[start : start + 64]
        ref, _, mask = policy.score([s.prompt for s in mb], [s.response for s in mb], None, config.temperature)
        ref_sum = (ref * mask).sum(-1)  # (B,)
        kls += [float(s.token_logps.sum() - r) for s, r in zip(mb, ref_sum)]
    return statistics.fmean(kls)


def sft_control(seconds: float, seed: int) -> dict:
    """More SFT of the shipped checkpoint for ``seconds``, then the same held-out evaluation as the runs."""
    import marft_envs
    from marft_agents import LaMASPolicy, evaluate, load_base
    from marft_agents.pretraining.pretrain_config import PretrainConfig
    from marft_agents.pretraining.sft import train as sft_train

    model, tokenizer = load_base("embedded")
    # whole solutions only (unfinished_rate 0), constant 2e-4 (the from-scratch run's final rate,
    # 2e-3 * 0.1; the continued run that made the shipped model ended at 5e-5), no warm-up
    config = PretrainConfig(
        seconds=seconds,
        max_steps=None,
        lr=2e-4,
        min_lr_ratio=1.0,
        warmup_steps=0,
        seed=seed + 100,
        role_weights={"reasoner": 1.0, "actor": 0.3, "solver": 1.0},
        threads=1,
    )
    started = time.perf_counter()
    stats = sft_train(model, tokenizer, config, progress_bar=False)
    wall = time.perf_counter() - started
    model.eval()
    agents = marft_envs.make(CHAIN).possible_agents
    policy = LaMASPolicy(model, tokenizer, agents, mode="lora")
    after = evaluate(policy, CHAIN, {}, EVAL_N)
    return {"seconds": seconds, "wall_s": wall, "steps": stats.get("steps"), "eval_after": after}


# ---- orchestration and report ---------------------------------------------------------------------


def launch(spec: dict, out: Path) -> dict:
    started = time.perf_counter()
    log = out / (spec["name"].replace("/", "_") + ".log")
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as f:
        proc = subprocess.run(
            [sys.executable, __file__, "--worker", json.dumps(spec), "--out", str(out)], stdout=f, stderr=subprocess.STDOUT
        )
    status = "ok" if proc.returncode == 0 else f"failed (exit {proc.returncode}, see {log.name})"
    print(f"  {spec['name']:<22} {status:<10} {time.perf_counter() - started:6.0f} s", flush=True)
    return {**spec, "status": status, "wall_s": time.perf_counter() - started}


def collect(spec: dict, out: Path) -> dict:
    """Read one finished run's numbers."""
    run_dir = out / spec["name"]
    if spec["status"] != "ok":
        return spec
    summary = json.loads((run_dir / "summary.json").read_text())
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    evals = [
        summary["eval_before"]["accuracy"],
        *[r["eval/accuracy"] for r in rows if "eval/accuracy" in r],
        summary["eval_after"]["accuracy"],
    ]
    res = {
        **spec,
        "before": evals[0],
        "best": max(evals[1:]),
        "final": evals[-1],
        "evals": evals,
        "train_wall_s": summary["wall_time_s"],
        "kl": json.loads((run_dir / "kl.json").read_text())["kl_per_action"],
        "train_solved": [r["train/solved"] for r in rows],
        "final_train_reward": statistics.fmean(r["train/return"] for r in rows[-20:]),
    }
    roles = summary["eval_after"].get("roles", {})
    if "reasoner_0" in roles:
        r = roles["reasoner_0"]
        res["roles"] = {
            "reasoner_own": r.get("own_accuracy"),
            "actor_if_right": r.get("answer_accuracy_when_right"),
            "actor_if_wrong": r.get("answer_accuracy_when_wrong"),
        }
    return res


def fmt(x, pct=True) -> str:
    if x is None:
        return "—"
    return f"{x:.1%}" if pct else f"{x:.3f}"


def table(results: list[dict], sft: dict | None) -> str:
    lines = [
        "| algorithm | runs | held-out before | best | final | KL to ref (nats/action) | wall (min) | reasoner own / actor if right / if wrong (final) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    groups: dict[str, list[dict]] = {}
    for r in results:
        if r["group"] != "sweep":
            groups.setdefault(r["group"], []).append(r)
    for group, runs in groups.items():
        ok = [r for r in runs if r["status"] == "ok"]
        failed = len(runs) - len(ok)
        if not ok:
            lines.append(f"| {group} | {failed} failed | | | | | | |")
            continue

        def agg(key, pct=True):
            xs = [r[key] for r in ok]
            if len(xs) == 1:
                return fmt(xs[0], pct)
            return f"{fmt(statistics.fmean(xs), pct)} ± {fmt(statistics.stdev(xs), pct)}"

        roles = "—"
        if "roles" in ok[0]:
            roles = " / ".join(
                fmt(statistics.fmean(r["roles"][k] for r in ok if r["roles"][k] is not None))
                if any(r["roles"][k] is not None for r in ok)
                else "—"
                for k in ("reasoner_own", "actor_if_right", "actor_if_wrong")
            )
        n = f"{len(ok)}" + (f" ({failed} failed)" if failed else "")
        lines.append(
            f"| {group} | {n} | {agg('before')} | {agg('best')} | {agg('final')} | {agg('kl', False)} | "
            f"{statistics.fmean(r['train_wall_s'] for r in ok) / 60:.1f} | {roles} |"
        )
    if sft:
        lines.append(
            f"| control: more SFT, same wall time | 1 | {fmt(results[0].get('before'))} | — | "
            f"{fmt(sft['eval_after']['accuracy'])} | — | {sft['wall_s'] / 60:.1f} | — |"
        )
    sweep = [r for r in results if r["group"] == "sweep" or r["name"] in ("cory", f"ppo/s{results[0]['overrides']['seed']}")]
    lines += [
        "",
        "Learning-rate sweep (one seed): held-out final accuracy, KL to reference, last-20-update training reward.",
        "",
        "| run | lr | final | KL | training reward |",
        "|---|---|---|---|---|",
    ]
    for r in sweep:
        if r["status"] != "ok":
            lines.append(f"| {r['name']} | | {r['status']} | | |")
            continue
        algo = r["overrides"].get("algo", "marft")
        lr = r["overrides"].get(f"{algo}.lr", 3e-4)
        lines.append(f"| {r['name']} | {lr:g} | {fmt(r['final'])} | {fmt(r['kl'], False)} | {r['final_train_reward']:.3f} |")
    return "\n".join(lines)


def plots(results: list[dict], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from marft_agents.runs.plots import trailing_mean

    ok = [r for r in results if r["status"] == "ok"]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(13, 5))
    colors: dict[str, str] = {}
    for r in ok:
        if r["group"] == "sweep":
            continue
        first = r["group"] not in colors
        (line,) = a1.plot(trailing_mean(r["train_solved"], 10), lw=1.3, c=colors.get(r["group"]), label=r["group"] if first else None)
        colors.setdefault(r["group"], line.get_color())
        every = r["overrides"]["eval_every"]
        xs = [0, *[every * (k + 1) for k in range(len(r["evals"]) - 2)], r["overrides"]["updates"]]
        a2.plot(xs, r["evals"], ".--", c=colors[r["group"]], label=r["group"] if first else None)
    a1.set(title="training episodes solved (10-update mean)", xlabel="update")
    a2.set(title=f"held-out accuracy, greedy ({EVAL_N} problems)", xlabel="update")
    for a in (a1, a2):
        a.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "curves.png", dpi=100)
    plt.close(fig)

    sweep = [r for r in ok if r["group"] == "sweep" or r["name"] == "cory" or r["name"].startswith("ppo/s")]
    fig, (b1, b2) = plt.subplots(1, 2, figsize=(12, 4.5))
    for algo, marker in (("cory", "o"), ("ppo", "s")):
        rs = sorted([r for r in sweep if r["overrides"].get("algo") == algo], key=lambda r: r["overrides"].get(f"{algo}.lr", 3e-4))
        if not rs:
            continue
        lrs = [r["overrides"].get(f"{algo}.lr", 3e-4) for r in rs]
        b1.scatter([r["kl"] for r in rs], [r["final_train_reward"] for r in rs], marker=marker, label=algo.upper())
        for r, lr in zip(rs, lrs):
            b1.annotate(f"{lr:g}", (r["kl"], r["final_train_reward"]), fontsize=7)
        b2.plot(lrs, [r["final"] for r in rs], marker=marker, label=algo.upper())
    b1.set(title="training reward (last 20 updates) vs KL to reference", xlabel="KL (nats per action)", ylabel="reward")
    b2.set(title="held-out accuracy after training vs learning rate", xlabel="learning rate", xscale="log")
    for b in (b1, b2):
        b.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "reward_vs_kl.png", dpi=100)
    fig.savefig(out / "lr_sweep.png", dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--updates", type=int, default=100)
    p.add_argument("--seeds", default="0,1,2", help="seeds of the main contrast (the first one for the rest)")
    p.add_argument("--workers", type=int, default=2, help="runs at a time (each uses one torch thread)")
    p.add_argument("--quick", action="store_true", help="4 updates, one seed: check the pipeline in a few minutes")
    p.add_argument("--out", default=str(OUT))
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    out = Path(args.out)
    if args.worker:
        worker(json.loads(args.worker), out)
        return
    seeds = [int(s) for s in args.seeds.split(",")]
    updates = args.updates
    if args.quick:
        seeds, updates = seeds[:1], 4
    out.mkdir(parents=True, exist_ok=True)
    specs = run_specs(seeds, updates)
    started = time.perf_counter()
    print(f"{len(specs)} runs + the SFT control, {args.workers} at a time, {updates} updates each -> {out}")
    with ThreadPoolExecutor(args.workers) as pool:
        finished = list(pool.map(lambda s: launch(s, out), specs))
    results = [collect(s, out) for s in finished]
    marft_walls = [r["train_wall_s"] for r in results if r["group"] == "MARFT (action)" and r["status"] == "ok"]
    sft = None
    if marft_walls:
        spec = {"name": "sft_control", "group": "control", "kind": "sft", "seed": seeds[0], "seconds": statistics.median(marft_walls)}
        if launch(spec, out)["status"] == "ok":
            sft = json.loads((out / "sft_control" / "sft.json").read_text())
    text = table(results, sft)
    (out / "table.md").write_text(text + "\n")
    (out / "results.json").write_text(json.dumps({"results": results, "sft_control": sft}, indent=2, default=str))
    plots(results, out)
    print(text)
    print(f"total {(time.perf_counter() - started) / 60:.1f} min; table, results, curves.png, reward_vs_kl.png in {out}")


if __name__ == "__main__":
    main()

"""How well MARFT's value head fits after one update, by input scaling, ``critic_epochs`` and ``critic_lr``.

    .venv/bin/python benchmarks/critic_fit.py [--out benchmarks/results/critic_fit.json]

The critic's features are frozen, so its fit can be measured on recorded ``(features, returns)``
without training a policy. This script records them from the embedded model on
``marft/MathChain-v0`` (T 0.7, 48 tokens, 32 episodes per update: E1's shape) and replays MARFT's
critic step exactly as :class:`marft_agents.algorithms.marft.MARFT` runs it: a fresh
:class:`~marft_agents.algorithms.critic.ValueHead`, the old values, chain-GAE returns
(:func:`~marft_agents.algorithms.marft.compute_advantages`), then
:func:`~marft_agents.algorithms.critic.fit_critic` (clipped value loss, minibatch 64, grad norm 0.5).

Two reward sources on the same features:

- ``synthetic 6%``: each episode's team reward drawn as Bernoulli(p), ``p`` a logistic function of its
  first prompt's features, calibrated to E1's reward rate (6 %), so a good critic has something to
  find and a bad one has a mean to overshoot;
- ``embedded``: the embedded model's own rewards.

For each input (``raw`` hidden states, ``standardised`` by the head's running statistics),
``critic_epochs`` in {1, 2, 4, 8} and ``critic_lr`` in {1e-4, 3e-4, 1e-3} it reports, averaged over
5 critic seeds, over 8 updates (each on its own batch, as in E1): after the first update, the
critic's mean value on its batch (against the batch's mean return, E1's failure was +1.24 against
0.06) and, on held-out batches, the value error (RMSE against the Monte-Carlo returns) and the
explained variance ``1 - Var(G - V) / Var(G)``; the same after the last update; and the mean over
the updates of ``|mean V - mean G|`` on each batch (how far the critic's level swings). CPU only,
well under 2 minutes.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402

EPISODES = 32
"""Episodes per update (E1's)."""
TRAIN_BATCHES = 8
"""Updates replayed, each on its own batch (E1 had 8)."""
HELD_OUT_BATCHES = 2
"""Batches the fitted critic is scored on (never trained on)."""
RATE = 0.06
"""E1's reward rate: the synthetic rewards' mean."""
EPOCHS = (1, 2, 4, 8)
LRS = (1e-4, 3e-4, 1e-3)
SEEDS = (0, 1, 2, 3, 4)
GAMMA, GAE_LAMBDA = 0.99, 0.95


def flatten(episodes) -> list:
    """Every agent-step of every episode, in acting order (the order the learner's batch has)."""
    return [s for e in episodes for s in e.steps]


def cpu_name() -> dict:
    """``lscpu``'s model name and whether it has AVX2 / AVX-512 (the kernels differ)."""
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return {"model": platform.processor() or "unknown", "flags": ""}
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    flags = fields.get("Flags", "").split()
    wanted = [f for f in ("avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16") if f in flags]
    return {"model": fields.get("Model name", "unknown").strip(), "flags": " ".join(wanted)}


def collect(batches: int):
    """``batches`` lists of E1-shaped episodes from the embedded model, with their frozen critic features."""
    import marft_envs
    from marft_agents import LaMASPolicy, RolloutEngine, Sampling, load_base
    from marft_agents.algorithms.critic import features

    envs = [marft_envs.make("marft/MathChain-v0") for _ in range(EPISODES)]
    model, tokenizer = load_base("embedded")
    policy = LaMASPolicy(model, tokenizer, envs[0].possible_agents)
    engine = RolloutEngine(policy, Sampling(0.7, 48))
    torch.manual_seed(0)
    out = []
    for b in range(batches):
        episodes = engine.collect(envs, range(b * EPISODES, (b + 1) * EPISODES))
        out.append((episodes, features(policy, flatten(episodes), 64)))  # (N, d)
    return out


def synthetic(episodes, feats: torch.Tensor, direction: torch.Tensor, bias: float, rng: np.random.Generator):
    """The episodes with their team reward redrawn: Bernoulli(sigmoid(z . direction + bias)) on the last round."""
    from marft_envs.outcomes import SHARED_REWARD

    steps = flatten(episodes)
    first = {}
    for i, s in enumerate(steps):
        first.setdefault(s.episode, i)
    out = []
    for e in episodes:
        p = float(torch.sigmoid(feats[first[e.index]] @ direction + bias))
        paid = float(rng.random() < p)
        last = e.steps[-1].round
        new = [
            dataclasses.replace(
                s, reward=paid if s.round == last else 0.0, info={**s.info, SHARED_REWARD: paid if s.round == last else 0.0}
            )
            for s in e.steps
        ]
        out.append(dataclasses.replace(e, steps=new))
    return out


def calibrate(z: torch.Tensor, direction: torch.Tensor) -> float:
    """The bias that makes ``mean(sigmoid(z . direction + bias))`` equal :data:`RATE` (bisection)."""
    lo, hi = -30.0, 30.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if float(torch.sigmoid(z @ direction + mid).mean()) < RATE else (lo, mid)
    return (lo + hi) / 2


def replay(batches, held_out, *, standardised: bool, epochs: int, lr: float, seed: int) -> dict:
    """MARFT's critic over ``batches`` (one update each); its scores after the first and the last update."""
    from marft_agents.algorithms.critic import ValueHead, fit_critic
    from marft_agents.algorithms.marft import compute_advantages

    torch.manual_seed(seed)
    critic = ValueHead(batches[0][1].shape[1])
    optimizer = torch.optim.AdamW(critic.parameters(), lr=lr, weight_decay=0.0)
    rng = np.random.default_rng(seed)
    rows, gaps = {}, []
    for k, (episodes, feats) in enumerate(batches):
        steps = flatten(episodes)
        if standardised:
            critic.observe(feats)
        with torch.no_grad():
            values_old = critic(feats)  # (N,)
        _, returns = compute_advantages(steps, values_old, gamma=GAMMA, gamma_agent=GAMMA, lam=GAE_LAMBDA)
        fit_critic(
            critic, optimizer, (feats,), values_old, returns, rng, epochs=epochs, minibatch_size=64, value_clip=0.2, max_grad_norm=0.5
        )
        if k in (0, len(batches) - 1):
            rows[f"update {k + 1}"] = score(critic, feats, returns, held_out)
        with torch.no_grad():
            gaps.append(abs(float(critic(feats).mean() - returns.mean())))
    rows["level gap"] = {"mean": float(np.mean(gaps)), "max": float(np.max(gaps))}
    return rows


def score(critic, feats: torch.Tensor, returns: torch.Tensor, held_out) -> dict:
    """The critic's mean value on its batch, and its error and explained variance on the held-out batches."""
    from marft_agents.algorithms.marft import compute_advantages

    with torch.no_grad():
        mean_value = float(critic(feats).mean())
        values, targets = [], []
        for episodes, f in held_out:
            steps = flatten(episodes)
            _, g = compute_advantages(steps, torch.zeros(len(steps)), gamma=GAMMA, gamma_agent=GAMMA, lam=1.0)  # Monte-Carlo
            values.append(critic(f))
            targets.append(g)
    v, g = torch.cat(values).double(), torch.cat(targets).double()
    ev = 1.0 - float((g - v).var() / g.var()) if float(g.var()) > 0 else float("nan")
    return {
        "value_mean": mean_value,
        "return_mean": float(returns.mean()),
        "rmse": float(((g - v) ** 2).mean().sqrt()),
        "explained_variance": ev,
    }


def first_prompts(episodes, feats: torch.Tensor) -> torch.Tensor:
    """The features of each episode's first agent-step, ``(E, d)``: what the synthetic reward depends on."""
    first = {}
    for i, s in enumerate(flatten(episodes)):
        first.setdefault(s.episode, i)
    return feats[list(first.values())]


def feature_scales(feats: torch.Tensor) -> dict:
    """How far raw features are from standardised: row L1 norm and the spread of per-feature scales."""
    std = feats.std(0)
    return {
        "d": feats.shape[1],
        "row_l1_mean": float(feats.abs().sum(1).mean()),
        "feature_mean_abs_max": float(feats.mean(0).abs().max()),
        "feature_std_min": float(std.min()),
        "feature_std_median": float(std.median()),
        "feature_std_max": float(std.max()),
    }


def line(cell: dict) -> str:
    """One grid cell, printed."""
    u1, last, gap = cell["update 1"], cell[f"update {TRAIN_BATCHES}"], cell["level gap"]
    return (
        f"u1: V {u1['value_mean']:+.3f} (G {u1['return_mean']:.3f}) rmse {u1['rmse']:.3f} ev {u1['explained_variance']:+.3f} | "
        f"u{TRAIN_BATCHES}: rmse {last['rmse']:.3f} ev {last['explained_variance']:+.3f} | |V-G| mean {gap['mean']:.3f} max {gap['max']:.3f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="benchmarks/results/critic_fit.json")
    args = parser.parse_args()
    torch.set_num_threads(1)
    started, cpu_started = time.perf_counter(), time.process_time()
    recorded = collect(TRAIN_BATCHES + HELD_OUT_BATCHES)
    collected_s = time.perf_counter() - started

    # the synthetic rewards: a fixed random direction in the standardised first-prompt features
    all_feats = torch.cat([f for _, f in recorded])
    mean, std = all_feats.mean(0), all_feats.std(0).clamp_min(1e-2)
    gen = torch.Generator().manual_seed(0)
    direction = torch.randn(all_feats.shape[1], generator=gen) / all_feats.shape[1] ** 0.5 * 2.0  # logit spread ~2
    firsts = torch.cat([first_prompts(e, f) for e, f in recorded])
    bias = calibrate((firsts - mean) / std, direction)
    rng = np.random.default_rng(0)
    sources = {"synthetic 6%": [(synthetic(e, (f - mean) / std, direction, bias, rng), f) for e, f in recorded], "embedded": recorded}
    results = {"cpu": cpu_name(), "threads": 1, "episodes_per_update": EPISODES, "features": feature_scales(all_feats), "sources": {}}
    print(json.dumps(results["features"]))
    for name, batches in sources.items():
        train, held = batches[:TRAIN_BATCHES], batches[TRAIN_BATCHES:]
        rate = float(np.mean([e.team_return > 0 for b, _ in batches for e in b]))
        print(f"{name}: {rate:.1%} of {len(batches) * EPISODES} episodes rewarded")
        table = {}
        for inputs in ("raw", "standardised"):
            for epochs in EPOCHS:
                for lr in LRS:
                    runs = [replay(train, held, standardised=inputs == "standardised", epochs=epochs, lr=lr, seed=s) for s in SEEDS]
                    cell = {u: {k: float(np.mean([r[u][k] for r in runs])) for k in runs[0][u]} for u in runs[0]}
                    table[f"{inputs} epochs={epochs} lr={lr:g}"] = cell
                    print(f"  {inputs:12s} epochs={epochs} lr={lr:<6g} {line(cell)}", flush=True)
        results["sources"][name] = {"rewarded": rate, "table": table}
    results["seconds"] = {"wall": time.perf_counter() - started, "cpu": time.process_time() - cpu_started, "collect_wall": collected_s}
    print(json.dumps(results["cpu"]), json.dumps(results["seconds"]))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()

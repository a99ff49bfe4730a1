"""marft against TRL's ``GRPOTrainer`` on the same GRPO work, per step, in interleaved pairs of processes.

    make .venv-adapters/.installed          # TRL 1.16 lives there, never in the main venv
    .venv-adapters/bin/python benchmarks/peer_trl.py [--pairs 3] [--steps 3] [--threads 1]
    .venv-adapters/bin/python benchmarks/peer_trl.py --smoke   # the embedded model, tiny budgets: not a result

The work (docs/real-models.md, "Against TRL on the same GRPO work"): ``marft/MathSolo-v0`` (``profile=general-v0``,
``problems=synthetic:0``), SmolLM2-135M-Instruct (TRL in float32, its CPU default; marft at ``--marft-dtype``,
default ``auto``: bf16 where the CPU computes it, as ``marft train`` runs), LoRA r 8 / alpha 16 on all seven linear
layers, 16 completions per step (4 problems x 4), 48 new tokens, T 0.7 with no top-k/top-p, lr 3e-4,
KL 0.04 to the base, one epoch and one optimizer step per step, the env's grader as the reward.

- **TRL**: ``trl.GRPOTrainer`` with ``per_device_train_batch_size=16, num_generations=4,
  max_completion_length=48, beta=0.04, top_k=0, top_p=1, num_iterations=1, use_cpu=True``, the
  same LoRA as ``peft_config``, prompts from :func:`marft_agents.rollout.trl.solo_dataset` and the
  reward from :func:`marft_agents.rollout.trl.solo_reward`. A step is timed from the trainer's
  ``on_step_begin`` to ``on_step_end`` (its generation, scoring and optimizer step).
- **marft**: the library's GRPO learner (``GRPOConfig(group_size=4, minibatch_size=16)``) over a
  ``RolloutEngine`` collection of 16 episodes (4 problems x 4), as ``marft train --algo grpo`` runs
  them. A step is one collection plus one ``update``.

Each side runs in its own process (``--side trl|marft``); a pair runs both, the order alternating
between pairs, so drift on the machine falls on both. Per side: wall and CPU seconds of each step
(the first step, which pays one-time costs, is reported but left out of the medians) and the mean
reward of its completions (a sanity check that both do the same work). Ratios TRL / marft are per
pair. Results go to ``benchmarks/results/peer_trl.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

ENV = "marft/MathSolo-v0"
KWARGS = {"profile": "general-v0", "problems": "synthetic:0"}
PROMPTS, G, TOKENS, TEMPERATURE, LR, KL = 4, 4, 48, 0.7, 3e-4, 0.04
TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def model_path(model: str) -> str:
    """A local folder for a named or embedded model (TRL loads from a path); other names unchanged."""
    from marft_agents import embedded_model_path
    from marft_agents.models.named import resolve
    from marft_agents.models.policy import EMBEDDED

    return str(embedded_model_path()) if model == EMBEDDED else resolve(model)


def trl_side(args) -> dict:
    import torch
    import trl
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback

    from marft_agents.rollout.trl import solo_dataset, solo_reward

    path = model_path(args.model)
    steps, rewards = [], []

    class Clock(TrainerCallback):
        def on_step_begin(self, *a, **k):
            self.t = (time.perf_counter(), time.process_time())

        def on_step_end(self, *a, **k):
            steps.append({"wall_s": time.perf_counter() - self.t[0], "cpu_s": time.process_time() - self.t[1]})

    grade = solo_reward(ENV, env_kwargs=KWARGS)

    def reward(completions, **kwargs):
        out = grade(completions, **kwargs)
        rewards.extend(out)
        return out

    config = trl.GRPOConfig(
        output_dir=str(Path(args.tmp) / "trl"),
        per_device_train_batch_size=PROMPTS * G,
        num_generations=G,
        max_completion_length=args.tokens,
        max_steps=args.steps,
        learning_rate=LR,
        beta=KL,
        temperature=TEMPERATURE,
        top_k=0,
        top_p=1.0,
        num_iterations=1,
        use_cpu=True,
        bf16=False,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        shuffle_dataset=False,
        dataloader_num_workers=0,
        seed=0,
    )
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    trainer = trl.GRPOTrainer(
        model=model,
        processing_class=AutoTokenizer.from_pretrained(path),
        args=config,
        reward_funcs=[reward],
        train_dataset=solo_dataset(ENV, range(1_000, 1_000 + PROMPTS * args.steps), env_kwargs=KWARGS),
        peft_config=LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, target_modules=list(TARGETS), task_type="CAUSAL_LM"),
        callbacks=[Clock()],
    )
    trainer.train()
    return {"steps": steps, "mean_reward": statistics.fmean(rewards) if rewards else None, "completions": len(rewards)}


def marft_side(args) -> dict:
    import numpy as np
    import torch

    import marft_envs
    from marft_agents import RolloutEngine, Sampling, TrainConfig, algorithms, build_policy

    n = PROMPTS * G
    envs = [marft_envs.make(ENV, **KWARGS) for _ in range(n)]
    config = TrainConfig(
        model=args.model,
        env=ENV,
        env_kwargs=KWARGS,
        threads=args.threads,
        lora_r=8,
        lora_alpha=16,
        lora_targets=list(TARGETS),
        dtype=args.marft_dtype,
    )
    policy = build_policy(config, envs[0].possible_agents)
    GRPOConfig, GRPO = algorithms.lookup("grpo")
    algo = GRPO(policy, GRPOConfig(group_size=G, minibatch_size=n, lr=LR, kl_coef=KL, ppo_epochs=1), temperature=TEMPERATURE)
    rollout = RolloutEngine(policy, Sampling(temperature=TEMPERATURE, max_new_tokens=args.tokens))
    rng, steps, rewards = np.random.default_rng(0), [], []
    torch.manual_seed(0)
    for k in range(args.steps):
        t = (time.perf_counter(), time.process_time())
        episodes = rollout.collect(envs, range(k * n, (k + 1) * n), seed_of=lambda i: 1_000 + i // G)
        generated = time.perf_counter() - t[0]
        algo.update(episodes, k, rng)
        rewards += [s.reward for e in episodes for s in e.steps]
        steps.append({"wall_s": time.perf_counter() - t[0], "cpu_s": time.process_time() - t[1], "generation_s": generated})
    return {"steps": steps, "mean_reward": statistics.fmean(rewards), "completions": len(rewards)}


def run_side(side: str, args) -> dict:
    """One side in a fresh process of this interpreter; its JSON result, plus the process's wall and CPU seconds."""
    out = Path(args.tmp) / f"{side}.json"
    cmd = [sys.executable, __file__, "--side", side, "--steps", str(args.steps), "--threads", str(args.threads), "--model", args.model]
    cmd += ["--tokens", str(args.tokens), "--tmp", args.tmp, "--marft-dtype", args.marft_dtype]
    t0, r0 = time.perf_counter(), os.times()
    subprocess.run(cmd, check=True)
    r1 = os.times()
    result = json.loads(out.read_text())
    result["process_wall_s"] = time.perf_counter() - t0
    result["process_cpu_s"] = (r1.children_user - r0.children_user) + (r1.children_system - r0.children_system)
    return result


def summary(side: dict) -> dict:
    later = side["steps"][1:] or side["steps"]  # the first step pays one-time costs
    return {k: statistics.median(s[k] for s in later) for k in ("wall_s", "cpu_s")}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--side", choices=("trl", "marft"), help="run one side in this process (what the pairs call)")
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--steps", type=int, default=3, help="steps per process (the first is left out of the medians)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--model", default="smollm2-135m-instruct")
    p.add_argument("--marft-dtype", default="auto", help="marft's base dtype (TRL's side stays float32, its CPU default)")
    p.add_argument("--tokens", type=int, default=TOKENS)
    p.add_argument("--tmp", default=str(Path(__file__).parent / "results" / "peer_trl_tmp"))
    p.add_argument(
        "--smoke", action="store_true", help="the embedded model, 1 pair of 2 steps of 8 tokens: checks the script, not a result"
    )
    p.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "peer_trl.json")
    args = p.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    Path(args.tmp).mkdir(parents=True, exist_ok=True)
    if args.side:
        result = (trl_side if args.side == "trl" else marft_side)(args)
        (Path(args.tmp) / f"{args.side}.json").write_text(json.dumps(result))
        return 0
    if args.smoke:
        args.model, args.pairs, args.steps, args.tokens = "embedded", 1, 2, 8
        args.out = args.out.with_name("peer_trl_smoke.json")
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from roofline import cpu

    pairs = []
    for k in range(args.pairs):
        order = ("trl", "marft") if k % 2 == 0 else ("marft", "trl")
        got = {side: run_side(side, args) for side in order}
        t, m = summary(got["trl"]), summary(got["marft"])
        pair = {
            "order": list(order),
            "trl": got["trl"],
            "marft": got["marft"],
            "wall_ratio": t["wall_s"] / m["wall_s"],
            "cpu_ratio": t["cpu_s"] / m["cpu_s"],
        }
        pairs.append(pair)
        print(
            f"pair {k}: TRL {t['wall_s']:.1f} s ({t['cpu_s']:.1f} CPU) per step, marft {m['wall_s']:.1f} s ({m['cpu_s']:.1f} CPU): "
            f"{pair['wall_ratio']:.2f}x wall, {pair['cpu_ratio']:.2f}x CPU; mean reward TRL {got['trl']['mean_reward']:.3f}, "
            f"marft {got['marft']['mean_reward']:.3f}",
            flush=True,
        )

    def spread(key: str) -> dict:
        xs = [p[key] for p in pairs]
        return {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}

    result = {
        "cpu": cpu(),
        "threads": args.threads,
        "model": args.model,
        "steps_per_process": args.steps,
        "marft_dtype": args.marft_dtype,
        "pairs": pairs,
        "trl_over_marft_wall": spread("wall_ratio"),
        "trl_over_marft_cpu": spread("cpu_ratio"),
    }
    print(json.dumps({k: result[k] for k in ("trl_over_marft_wall", "trl_over_marft_cpu")}, indent=1))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

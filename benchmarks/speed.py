"""One speed report on the machine at hand: each figure as a ratio against its baseline, measured in the same run.

    .venv/bin/python benchmarks/speed.py [--before DIR] [--only decode,update,grpo,memory,ranks] [--threads 2]

Run it alone (nothing else on the cores: torch's threads slow 3-10x beside a busy process). Sections:

- ``decode``: a batch-16 decode of SmolLM2-135M-Instruct (16 ``marft/MathChain-v0`` reasoner prompts of
  unequal length, T 0.7, the end-of-turn token never drawn so every row runs ``--tokens`` steps). Seconds
  per decode step (the prompt's prefill taken out: the difference of two lengths, over their step
  difference) of ``transformers``' bare ``generate`` on the base alone, fp32 and bf16, against marft's
  engine path (``LaMASPolicy.generate``: the decode loop of ``models/lm.py``, a LoRA adapter on every linear
  layer) at fp32 and at ``dtype=auto``, each also with ``lean_decode=false`` (the model's forward at every step
  where ``models/decode.py``'s lean step is the default), and ``dtype=auto`` with ``lora_compute=float32`` (the LoRA
  branches in float32, as before that key). Median over ``--repeats`` interleaved repeats. Beside it, each one's time to
  the first token (the prompts' prefill and one draw: ``s_first_token``).
- ``update``: one 16-episode update of the 2-agent chain on SmolLM2 (``marft train``: ``synthetic:0``,
  ``general-v0``, 48 new tokens, MARFT defaults, 2 updates, their mean timed) with today's code at
  ``dtype=auto``, ``dtype=float32``, whole minibatches, micro-batches of 2048 tokens (the default before 1024) and
  ``lora_compute=float32``, and with the code in ``--before`` (a ``git worktree`` of the
  commit before the speed work: the baseline) at its defaults; each a child process with ``PYTHONPATH``
  set to its tree.
- ``grpo``: ``benchmarks/peer_trl.py`` (marft's GRPO against TRL's ``GRPOTrainer`` on the same work, in the
  ``.venv-adapters`` venv), one pair, marft at ``dtype=auto``, TRL at its CPU defaults (fp32).
- ``memory``: ``benchmarks/e2_peak_memory.py`` with every default (``dtype=auto``), with micro-batches of 2048 tokens
  (the default before 1024), with the LoRA branches in float32 (``lora_compute=float32``), as E2 ran (float32) and with whole minibatches (``ppo.micro_batch_tokens=0``:
  the learner before micro-batches): E2's peak resident memory and its update's seconds, side by side (long: one
  E2 update takes 2-13 min).
- ``ranks``: ``benchmarks/data_parallel.py`` (one rank against two on the same work).

The report (``benchmarks/results/speed-<cpu>.json``) names the CPU, its flags, and each section's wall and
CPU seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import torch  # noqa: E402
from roofline import cpu  # noqa: E402

MODEL = "smollm2-135m-instruct"
SECTIONS = ("decode", "update", "grpo", "memory", "ranks")


def chain_prompts(policy, n: int) -> list[list[int]]:
    """``n`` MathChain reasoner prompts of unequal length (problems differ), as the trainer builds them."""
    import marft_envs

    env = marft_envs.make("marft/MathChain-v0", problems="synthetic:1,2", profile="general-v0")
    prompts = []
    for seed in range(n):
        env.reset(seed=seed)
        prompts.append(policy.prompt(env.observe("reasoner_0")))
    return prompts


def decode_section(args) -> dict:
    """Seconds per batch-16 decode step: bare ``generate`` (fp32, bf16) against marft's engine path (fp32, auto)."""
    from marft_agents import TrainConfig, build_policy
    from marft_agents.models import lm

    policies = {}
    for name, dtype, lora in (("float32", "float32", "base"), ("auto", "auto", "base"), ("auto, lora fp32", "auto", "float32")):
        policy = build_policy(TrainConfig(model=MODEL, dtype=dtype, lora_compute=lora), ["reasoner_0", "actor_0"])
        generator = torch.Generator().manual_seed(0)
        with torch.no_grad():  # adapters off their zero init, so they do something
            for p in policy.parameters("reasoner_0"):
                p.add_(0.02 * torch.randn(p.shape, generator=generator).to(p.dtype))
        policies[name] = policy
    prompts = chain_prompts(policies["float32"], args.batch)
    never = -1  # an end-of-turn id no token has: every row runs the whole length
    pad, eos = policies["float32"].pad_token_id, policies["float32"].eos_token_id
    from marft_agents import load_base

    bare_bases = {dtype: load_base(MODEL, dtype=getattr(torch, dtype))[0] for dtype in ("float32", "bfloat16")}

    def bare(model, tokens):  # transformers' own generate on the base alone, as a user would call it
        ids, mask = lm.left_pad(prompts, pad)
        config = lm.sampling_config(tokens, 0.7, pad, eos)
        config.min_new_tokens = tokens
        model.generate(input_ids=ids, attention_mask=mask, generation_config=config)

    def ours(policy, tokens, lean_decode=True):
        with policy.active("reasoner_0") as model:
            lm.generate(
                model, prompts, temperature=0.7, max_new_tokens=tokens, pad_token_id=pad, eos_token_id=never, lean_decode=lean_decode
            )

    variants = {
        "bare generate, float32": lambda n: bare(bare_bases["float32"], n),
        "bare generate, bfloat16": lambda n: bare(bare_bases["bfloat16"], n),
        "marft engine, float32": lambda n: ours(policies["float32"], n),
        "marft engine, float32, lean_decode=false": lambda n: ours(policies["float32"], n, lean_decode=False),
        "marft engine, dtype=auto": lambda n: ours(policies["auto"], n),
        "marft engine, dtype=auto, lean_decode=false": lambda n: ours(policies["auto"], n, lean_decode=False),
        "marft engine, dtype=auto, lora_compute=float32": lambda n: ours(policies["auto, lora fp32"], n),
    }
    short, long = 4, 4 + args.tokens
    times: dict[str, list[dict]] = {name: [] for name in variants}
    first: dict[str, list[dict]] = {name: [] for name in variants}
    with torch.no_grad():
        for fn in variants.values():
            fn(2)  # warm-up
        for r in range(args.repeats):
            order = list(variants) if r % 2 == 0 else list(reversed(variants))
            for name in order:
                torch.manual_seed(r)
                first[name].append(_call_time(variants[name], 1))
                times[name].append(_step_time(variants[name], short, long))
    steps = {name: statistics.median(t["wall_s"] for t in runs) for name, runs in times.items()}
    firsts = {name: statistics.median(t["wall_s"] for t in runs) for name, runs in first.items()}
    base = steps["bare generate, float32"]
    return {
        "s_first_token": firsts,
        "first_token_runs": first,
        "first_token_speedup_over_bare_fp32": {name: firsts["bare generate, float32"] / s for name, s in firsts.items()},
        "batch": args.batch,
        "tokens": args.tokens,
        "prompt_tokens": [len(p) for p in prompts],
        "auto_dtype": str(next(p for n, p in policies["auto"].base.named_parameters() if "lora_" not in n).dtype),
        "s_per_step": steps,
        "runs": times,
        "speedup_over_bare_fp32": {name: base / s for name, s in steps.items()},
        "speedup_over_bare_bf16": {name: steps["bare generate, bfloat16"] / s for name, s in steps.items()},
    }


def _call_time(fn, tokens: int) -> dict:
    """Wall and CPU seconds of ``fn(tokens)``: with one token, the prompts' prefill and the first draw."""
    t0, c0 = time.perf_counter(), time.process_time()
    fn(tokens)
    return {"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0}


def _step_time(fn, short: int, long: int) -> dict:
    """Wall and CPU seconds per decode step: ``fn(long)`` minus ``fn(short)``, over ``long - short`` steps."""
    a, b = _call_time(fn, short), _call_time(fn, long)
    return {k: (b[k] - a[k]) / (long - short) for k in ("wall_s", "cpu_s")}


def train_update(tree: Path, overrides: list[str], threads: int) -> dict:
    """``marft train``'s second update (16 chain episodes on SmolLM2) with the code in ``tree``: its time split."""
    with tempfile.TemporaryDirectory(prefix="speed-update-") as tmp:
        command = [
            sys.executable, "-m", "marft_agents.cli", "train", "--no-progress", f"model={MODEL}",
            "env=marft/MathChain-v0", "env_kwargs.profile=general-v0", "env_kwargs.problems=synthetic:0",
            f"threads={threads}", "updates=2", "episodes_per_update=16", "max_new_tokens=48", "eval_episodes=1",
            "eval_every=0", "eval_rounds=0", "checkpoint_every=0", f"run_dir={tmp}/run", *overrides,
        ]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(tree)}
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=tmp)
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode:
            raise SystemExit(f"marft train failed in {tree}:\n{done.stderr[-2000:]}")
        rows = [json.loads(line) for line in Path(tmp, "run", "metrics.jsonl").read_text().splitlines()]
    updates = [{k: v for k, v in row.items() if k.startswith("time/")} for row in rows if "time/update_s" in row]
    return {
        "tree": str(tree),
        "overrides": overrides,
        "updates": updates,
        "process_wall_s": wall,
        "process_cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        "dtype_line": next((line for line in done.stderr.splitlines() if "dtype=auto" in line), None),
    }


def update_section(args) -> dict:
    runs = {
        "today, dtype=auto": train_update(ROOT, [], args.threads),
        "today, dtype=float32": train_update(ROOT, ["dtype=float32"], args.threads),
        "today, whole minibatches": train_update(ROOT, ["marft.micro_batch_tokens=0"], args.threads),
        "today, micro-batches of 2048 tokens": train_update(ROOT, ["marft.micro_batch_tokens=2048"], args.threads),
        "today, lora_compute=float32": train_update(ROOT, ["lora_compute=float32"], args.threads),
    }
    if args.before:
        runs["before, its defaults"] = train_update(args.before, [], args.threads)
    # the mean over both updates: one update's learner time swings 3x with how many of its groups carry signal
    # (MARFT skips an agent's step without one), and each side draws its own episodes
    seconds = {name: statistics.fmean(u["time/update_s"] for u in r["updates"]) for name, r in runs.items()}
    ratios = {name: seconds["today, dtype=float32"] / s for name, s in seconds.items()}
    out = {"runs": runs, "update_s": seconds, "speedup_over_today_float32": ratios}
    if args.before:
        out["speedup_over_before"] = {name: seconds["before, its defaults"] / s for name, s in seconds.items()}
    return out


def memory_section(result: Path) -> dict:
    """E2's peak memory and update seconds with every default (``dtype=auto``), against micro-batches of 2048 tokens (the
    default before), the LoRA branches in float32
    (``lora_compute=float32``, before that key), E2 as it ran (float32) and the same with whole minibatches
    (``micro_batch_tokens=0``, the learner before micro-batches), one child each."""
    script = [sys.executable, "benchmarks/e2_peak_memory.py", "--out", str(result)]
    runs = {
        "defaults (dtype=auto)": script_section([*script, "dtype=auto"], result),
        "dtype=auto, ppo.micro_batch_tokens=2048": script_section([*script, "dtype=auto", "ppo.micro_batch_tokens=2048"], result),
        "dtype=auto, lora_compute=float32": script_section([*script, "dtype=auto", "lora_compute=float32"], result),
        "float32 (E2 as it ran)": script_section(script, result),
        "float32, ppo.micro_batch_tokens=0": script_section([*script, "ppo.micro_batch_tokens=0"], result),
    }
    peaks = {name: r.get("result", {}).get("peak_rss_mb") for name, r in runs.items()}
    updates = {name: r.get("result", {}).get("update_s") for name, r in runs.items()}
    return {"runs": runs, "peak_rss_mb": peaks, "update_s": updates}


def script_section(command: list[str], result: Path) -> dict:
    """Run another benchmark script as a child; its JSON result, with the child's wall and CPU seconds."""
    before, started = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = {
        "command": command,
        "returncode": done.returncode,
        "wall_s": time.perf_counter() - started,
        "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        "stdout_tail": done.stdout[-3000:],
    }
    if done.returncode:
        out["stderr_tail"] = done.stderr[-3000:]
    elif result.exists():
        out["result"] = json.loads(result.read_text().splitlines()[-1]) if result.suffix == ".jsonl" else json.loads(result.read_text())
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", type=Path, default=None, help="a worktree of the code before the speed work (baseline)")
    p.add_argument("--only", default="decode,update,grpo", help=f"sections, comma-separated, of {list(SECTIONS)}")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--tokens", type=int, default=24, help="decode steps timed per call")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", type=Path, default=None, help="default: benchmarks/results/speed-<cpu kind>.json")
    args = p.parse_args(argv)
    sections = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = sorted(set(sections) - set(SECTIONS))
    if unknown:
        p.error(f"unknown sections {unknown}: choose from {list(SECTIONS)}")
    torch.set_num_threads(args.threads)
    machine = cpu()
    report: dict = {"cpu": machine, "threads": args.threads, "date": time.strftime("%Y-%m-%d"), "sections": {}}
    results = HERE / "results"
    runners = {
        "decode": lambda: decode_section(args),
        "update": lambda: update_section(args),
        "grpo": lambda: script_section(
            [
                str(ROOT / ".venv-adapters/bin/python"),
                "benchmarks/peer_trl.py",
                "--pairs",
                "1",
                "--steps",
                "3",
                "--threads",
                str(args.threads),
                "--out",
                str(results / "peer_trl-speed.json"),
            ],
            results / "peer_trl-speed.json",
        ),  # fmt: skip
        "memory": lambda: memory_section(results / "e2_peak_memory.jsonl"),
        "ranks": lambda: script_section(
            [sys.executable, "benchmarks/data_parallel.py", "--model", MODEL, "--out", str(results / "dp-speed.json")],
            results / "dp-speed.json",
        ),
    }
    for name in sections:
        started, cpu0 = time.perf_counter(), time.process_time()
        print(f"speed: {name} ...", file=sys.stderr, flush=True)
        report["sections"][name] = runners[name]()
        report["sections"][name]["section_wall_s"] = time.perf_counter() - started
        report["sections"][name]["section_cpu_s_this_process"] = time.process_time() - cpu0
        print(json.dumps(_headline(name, report["sections"][name]), indent=1), flush=True)
    kind = "-".join(f for f in ("avx512_bf16", "amx_bf16") if f in machine["flags"]) or "avx2"
    out = args.out or results / f"speed-{kind}.json"
    out.write_text(json.dumps(report, indent=2))
    print(f"speed: written {out}", file=sys.stderr)
    return 0


def _headline(name: str, section: dict) -> dict:
    """The figures of a section worth printing."""
    keys = {
        "decode": ("s_per_step", "speedup_over_bare_fp32", "speedup_over_bare_bf16", "s_first_token", "auto_dtype"),
        "update": ("update_s", "speedup_over_today_float32", "speedup_over_before"),
        "memory": ("peak_rss_mb", "update_s"),
    }.get(name)
    if keys is None:
        return {k: section.get(k) for k in ("returncode", "wall_s", "cpu_s", "result")}
    return {k: section.get(k) for k in keys}


if __name__ == "__main__":
    sys.exit(main())

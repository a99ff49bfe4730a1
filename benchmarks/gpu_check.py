"""The GPU check: the device tests, a training run with ``device=cuda``, and one update's speed on the GPU against the CPU.

    python benchmarks/gpu_check.py [--wheels gpu-wheels] [--out PATH] [--skip-cpu]

Made for a GPU machine with torch, transformers, peft and accelerate and no internet; the project's
other dependencies come as wheels (``make gpu-wheels`` downloads them into ``gpu-wheels/``, ~3 MB;
``--wheels DIR`` installs them first). Run from the repository root; it needs no install of the
project (it puts the root on ``sys.path``). Four steps, about 5 minutes with start-up on one GPU:

1. **device tests**: ``tests/agents/test_device.py`` with pytest (the ``device`` tests run every learner
   on the GPU and a run that checkpoints and resumes there; the trap tests run too);
2. **smoke runs** on the embedded model with ``device=cuda``: MARFT with ``dtype=auto`` (bfloat16 on a GPU
   that has it) for 2 updates, checkpointed, then resumed for a third; GRPO with ``gradient_checkpointing=true``;
3. **one update's speed** on a 135M-parameter model of SmolLM2-135M's shape (random weights: hidden 576,
   30 layers, 9 heads, 3 key-value heads, FF 1536, vocabulary 49,152; speed needs no trained weights), two
   agents of MathChain with LoRA on every linear layer: collection (generation) and MARFT's update, timed
   apart, on the GPU (``--repeats``, the first one warms up) and the same work on the CPU (once);
4. a table on stdout and the figures as JSON: ``--out``, else ``$OUT/gpu_check.json`` where ``$OUT`` is
   set, else ``benchmarks/results/gpu_check.json``.

On a machine where torch sees no GPU it stops at once with one line (exit 2). ``--cpu-dry-run`` runs every
step on the CPU instead, to check the script itself (its figures are no GPU's; use ``--layers 2`` there).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHAPE = dict(hidden_size=576, num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3, intermediate_size=1536, vocab_size=49152)
"""SmolLM2-135M's shape (its config.json), with random weights."""
WHEELS = ("gymnasium", "pettingzoo", "pytest", "pytest-timeout")
"""What ``--wheels`` installs (their dependencies come from the same folder or are already there)."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", help="where the JSON goes (default: $OUT/gpu_check.json, else benchmarks/results/gpu_check.json)")
    parser.add_argument("--wheels", help="a folder of wheels to install first, offline (make gpu-wheels)")
    parser.add_argument("--device", default="cuda", help="the GPU to check (default: cuda)")
    parser.add_argument("--episodes", type=int, default=16, help="episodes of the timed update (default: 16)")
    parser.add_argument("--max-new-tokens", type=int, default=64, help="tokens per response in the timed update (default: 64)")
    parser.add_argument("--layers", type=int, default=SHAPE["num_hidden_layers"], help="decoder layers of the timed model (default: 30)")
    parser.add_argument("--repeats", type=int, default=2, help="timed updates on the GPU, the first a warm-up (default: 2)")
    parser.add_argument("--skip-cpu", action="store_true", help="skip the CPU side of the timed update")
    parser.add_argument("--skip-tests", action="store_true", help="skip the device tests")
    parser.add_argument("--cpu-dry-run", action="store_true", help="run every step on the CPU, to check this script without a GPU")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    sys.path.insert(0, str(ROOT))
    report: dict = {"started": time.strftime("%Y-%m-%d %H:%M:%S"), "steps": {}}
    if args.wheels:
        report["steps"]["wheels"] = install_wheels(Path(args.wheels))
    try:
        import torch
    except ImportError:
        return refuse("torch is not installed here: the check needs torch, transformers, peft and accelerate")
    device = "cpu" if args.cpu_dry_run else args.device
    if not args.cpu_dry_run and not torch.cuda.is_available():
        return refuse(f"torch {torch.__version__} sees no CUDA device on this machine: run it on a GPU machine (docs/engines.md, On a GPU)")
    try:
        import marft_agents  # noqa: F401  (its dependencies: gymnasium and pettingzoo come as wheels)
        import marft_envs  # noqa: F401
    except ImportError as err:
        return refuse(f"cannot import marft ({err}): bring the wheels (make gpu-wheels) and pass --wheels DIR")
    report["machine"] = machine(torch, device)
    if not args.skip_tests:
        report["steps"]["device_tests"] = device_tests()
    report["steps"]["smoke"] = smoke_runs(device)
    report["steps"]["throughput"] = throughput(args, device)
    report["wall_s"] = round(time.perf_counter() - started, 1)
    print_table(report)
    out = (
        Path(args.out)
        if args.out
        else (Path(os.environ["OUT"]) if os.environ.get("OUT") else ROOT / "benchmarks" / "results") / "gpu_check.json"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1))
    print(f"wrote {out}")
    failed = [name for name, step in report["steps"].items() if isinstance(step, dict) and step.get("ok") is False]
    return 1 if failed else 0


def refuse(message: str) -> int:
    print(f"gpu_check: {message}", file=sys.stderr)
    return 2


def install_wheels(folder: Path) -> dict:
    """``pip install --no-index`` of :data:`WHEELS` from ``folder``: the step that needs no internet."""
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--find-links", str(folder), *WHEELS]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    return {"ok": proc.returncode == 0, "wall_s": round(time.perf_counter() - t0, 1), "tail": proc.stderr.strip().splitlines()[-3:]}


def machine(torch, device: str) -> dict:
    """What ran the check: the GPU, the CPU, the library versions."""
    import peft
    import transformers

    cpu = next((line.split(":", 1)[1].strip() for line in _cpuinfo() if line.startswith("model name")), platform.processor())
    info = {
        "cpu": cpu,
        "cpu_cores": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "peft": peft.__version__,
        "cuda": torch.version.cuda,
    }
    if device != "cpu":
        props = torch.cuda.get_device_properties(torch.device(device))
        info.update(gpu=props.name, gpu_memory_gb=round(props.total_memory / 2**30, 1), capability=f"{props.major}.{props.minor}")
        info["bf16"] = torch.cuda.is_bf16_supported(including_emulation=False)
    return info


def _cpuinfo() -> list[str]:
    try:
        return Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return []


def device_tests() -> dict:
    """``tests/agents/test_device.py`` (the GPU tests and the trap), in a child pytest."""
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not slow", "tests/agents/test_device.py"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return {"ok": False, "wall_s": round(time.perf_counter() - t0, 1), "summary": "timed out after 300 s"}
    lines = proc.stdout.strip().splitlines()
    failures = [line for line in lines if line.startswith(("FAILED", "ERROR"))]
    return {
        "ok": proc.returncode == 0,
        "wall_s": round(time.perf_counter() - t0, 1),
        "summary": lines[-1] if lines else "",
        "failures": failures,
    }


def smoke_runs(device: str) -> dict:
    """MARFT (dtype=auto) for 2 updates, checkpointed and resumed for a third; GRPO with gradient checkpointing."""
    import torch

    from marft_agents import checkpoint as ckpt
    from marft_agents import from_dict, train

    common = {"device": device, "eval_episodes": 8, "eval_rounds": 0, "eval_every": 0, "max_new_tokens": 24, "episodes_per_update": 8}
    out: dict = {"ok": True}
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        marft = {**common, "dtype": "auto", "checkpoint_every": 1, "run_dir": f"{tmp}/marft"}
        try:
            train(from_dict({**marft, "updates": 2}), progress=False, quiet=True)
            saved = torch.load(ckpt.latest_checkpoint(Path(tmp, "marft", "checkpoints")), weights_only=True)  # as saved: no map_location
            summary = train(from_dict({**marft, "updates": 3}), resume=True, progress=False, quiet=True)
            rows = [json.loads(line) for line in Path(tmp, "marft", "metrics.jsonl").read_text().splitlines()]
            out["marft"] = {
                "wall_s": round(time.perf_counter() - t0, 1),
                "updates_logged": [r["update"] for r in rows],
                "checkpoint_devices": sorted({t.device.type for t in _tensors(saved)}),
                "accuracy_before_after": [summary["eval_before"]["accuracy"], summary["eval_after"]["accuracy"]],
                "time_training_s": [round(r.get("time/training_s", 0.0), 2) for r in rows],
            }
            out["ok"] &= out["marft"]["updates_logged"] == [0, 1, 2] and out["marft"]["checkpoint_devices"] == ["cpu"]
        except Exception as err:  # a failed step is reported in the table and the JSON, and the check goes on
            out["ok"], out["marft"] = False, {"error": f"{type(err).__name__}: {str(err).splitlines()[0][:300] if str(err) else ''}"}
        t0 = time.perf_counter()
        grpo = {**common, "algo": "grpo", "gradient_checkpointing": True, "updates": 1, "checkpoint_every": 0, "run_dir": f"{tmp}/grpo"}
        try:
            train(from_dict(grpo), progress=False, quiet=True)
            row = json.loads(Path(tmp, "grpo", "metrics.jsonl").read_text().splitlines()[0])
            out["grpo_checkpointing"] = {"wall_s": round(time.perf_counter() - t0, 1), "loss": row.get("reasoner_0/loss")}
        except Exception as err:
            out["ok"], out["grpo_checkpointing"] = (
                False,
                {"error": f"{type(err).__name__}: {str(err).splitlines()[0][:300] if str(err) else ''}"},
            )
    return out


def _tensors(tree):
    import torch

    if isinstance(tree, torch.Tensor):
        yield tree
    elif isinstance(tree, dict):
        for v in tree.values():
            yield from _tensors(v)
    elif isinstance(tree, (list, tuple)):
        for v in tree:
            yield from _tensors(v)


def throughput(args: argparse.Namespace, device: str) -> dict:
    """One MARFT update (collection, then the update) of the SmolLM2-shaped model on ``device``, then on the CPU."""
    out: dict = {"ok": True, "shape": {**SHAPE, "num_hidden_layers": args.layers}, "episodes": args.episodes}
    out["max_new_tokens"] = args.max_new_tokens
    sides = [(device, args.repeats)] + ([] if args.skip_cpu or device == "cpu" else [("cpu", 1)])
    for where, repeats in sides:
        try:
            out[where] = timed_updates(where, args, repeats)
        except Exception as err:
            out["ok"], out[where] = False, {"error": f"{type(err).__name__}: {str(err).splitlines()[0][:300] if str(err) else ''}"}
    gpu, cpu = out.get(device, {}), out.get("cpu", {})
    if device != "cpu" and "update_s" in gpu and "update_s" in cpu:
        out["speedup"] = {k: round(cpu[k] / gpu[k], 1) for k in ("collect_s", "update_s", "total_s") if gpu[k] > 0}
    return out


def timed_updates(where: str, args: argparse.Namespace, repeats: int) -> dict:
    """``repeats`` collections and MARFT updates on ``where``; the figures of the last (the first warms up)."""
    import numpy as np
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    import marft_envs
    from marft_agents import LaMASPolicy, RolloutEngine, Sampling, algorithms, embedded_model_path
    from marft_envs.outcomes import SHARED_REWARD

    if where == "cpu":
        torch.set_num_threads(os.cpu_count() or 1)
    tokenizer = AutoTokenizer.from_pretrained(str(embedded_model_path()))  # its ids fit the larger vocabulary
    torch.manual_seed(0)
    config = LlamaConfig(
        **{**SHAPE, "num_hidden_layers": args.layers},
        max_position_embeddings=2048,
        rope_theta=100000.0,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.bos_token_id,
    )
    model = LlamaForCausalLM(config)
    envs = [marft_envs.make("marft/MathChain-v0") for _ in range(args.episodes)]
    targets = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")  # the trainer's default
    policy = LaMASPolicy(model, tokenizer, envs[0].possible_agents, lora_targets=targets).to(where)
    config_class, learner_class = algorithms.lookup("marft")
    algo = learner_class(policy, config_class(minibatch_size=args.episodes), temperature=1.0)
    engine = RolloutEngine(policy, Sampling(1.0, args.max_new_tokens))
    sync = torch.cuda.synchronize if where.startswith("cuda") else (lambda: None)
    if where.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    figures = {}
    for k in range(repeats):
        torch.manual_seed(k)
        sync()
        t0 = time.perf_counter()
        episodes = engine.collect(envs, range(k * args.episodes, (k + 1) * args.episodes))
        sync()
        t1 = time.perf_counter()
        for i, e in enumerate(episodes):  # returns that differ, so the update takes a policy step (a random model earns nothing)
            if i % 2:
                last = [s for s in e.steps if s.round == e.steps[-1].round]
                for s in last:
                    s.reward, s.info = 1.0, {**s.info, SHARED_REWARD: 1.0}
        algo.update(episodes, k, np.random.default_rng(k))
        sync()
        t2 = time.perf_counter()
        tokens = sum(len(s.response) for e in episodes for s in e.steps)
        figures = {
            "collect_s": round(t1 - t0, 2),
            "update_s": round(t2 - t1, 2),
            "total_s": round(t2 - t0, 2),
            "tokens": tokens,
            "gen_tokens_per_s": round(tokens / max(t1 - t0, 1e-9), 1),
        }
    if where.startswith("cuda"):
        figures["peak_memory_gb"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
        figures["dtype"] = str(next(policy.base.parameters()).dtype).replace("torch.", "")
    figures["threads"] = torch.get_num_threads() if where == "cpu" else None
    figures["parameters_m"] = round(sum(p.numel() for p in model.parameters()) / 1e6, 1)
    return figures


def print_table(report: dict) -> None:
    m = report["machine"]
    print(f"\nGPU check: {m.get('gpu', 'no GPU (--cpu-dry-run)')}; CPU {m['cpu']} x{m['cpu_cores']}; torch {m['torch']}, cuda {m['cuda']}")
    print(f"{'step':<28} {'ok':<5} {'wall s':>8}  details")
    for name, step in report["steps"].items():
        if name == "throughput":
            continue
        if name == "smoke":
            for run in ("marft", "grpo_checkpointing"):
                detail = step.get(run, {})
                print(f"{'smoke/' + run:<28} {str('error' not in detail):<5} {detail.get('wall_s', 0):>8}  {_short(detail)}")
            continue
        print(f"{name:<28} {str(step.get('ok')):<5} {step.get('wall_s', 0):>8}  {step.get('summary', '')}")
    t = report["steps"]["throughput"]
    print(
        f"\none update, {t['shape']['num_hidden_layers']}-layer SmolLM2-shaped model, {t['episodes']} episodes x 2 agents x {t['max_new_tokens']} tokens"
    )
    print(f"{'device':<10} {'collect s':>10} {'update s':>10} {'total s':>9} {'gen tok/s':>10} {'peak GB':>8}")
    for where, fig in t.items():
        if isinstance(fig, dict) and "total_s" in fig:
            print(
                f"{where:<10} {fig['collect_s']:>10} {fig['update_s']:>10} {fig['total_s']:>9} {fig['gen_tokens_per_s']:>10} {fig.get('peak_memory_gb', '-'):>8}"
            )
        elif isinstance(fig, dict) and "error" in fig:
            print(f"{where:<10} {fig['error']}")
    if "speedup" in t:
        print(f"speed-up over the CPU: {t['speedup']}")
    print(f"total wall time {report['wall_s']} s")


def _short(detail: dict) -> str:
    return json.dumps({k: v for k, v in detail.items() if k != "wall_s"})[:110]


if __name__ == "__main__":
    sys.exit(main())

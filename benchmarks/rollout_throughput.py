"""Rollout throughput: the RolloutEngine against a bare batched ``model.generate`` on the same prompts.

    .venv/bin/python benchmarks/rollout_throughput.py [--model embedded|PATH|random|smollm2-135m-instruct]
        [--repeats 3] [--batch-sizes 16,64] [--max-new-tokens 48] [--threads 1] [--skip-30m]
        [--lora-targets q_proj,v_proj|all] [--dtype float32|bfloat16] [--merge-lora]

What is measured, for each model and batch size ``B``:

- **engine**: ``RolloutEngine.collect`` of ``B`` ``marft/MathChain-v0`` episodes on ``B`` envs (2 agents,
  so 2 layers: one batched ``generate`` call of ``B`` reasoner prompts, then one of ``B`` actor
  prompts), including the LoRA policy wrapper, behaviour log-probs, prompt building
  and env stepping — everything between "reset the envs" and "episodes ready";
- **bare**: a plain ``model.generate`` (the same weights without the peft wrapper, no logits kept) on
  exactly the prompts the engine generated from, in the same two batches of ``B``, left padded, with
  the same sampling knobs (``marft_agents.models.lm.sampling_config``: temperature 1, everything else off,
  the same ``max_new_tokens``) and the same torch seed.

- **merged** (``--merge-lora``): the engine with ``generation.merge_lora`` (each adapter merged into a
  copy of the base's weights for the call), a third side in the rotation.

Both sides count only real response tokens (up to and including the first end-of-turn token). The
LoRA adapters start at zero (B = 0), so with the same seed both sides sample the same tokens; the
table says whether the counts matched. Throughput is tokens / wall seconds; the ratio engine/bare
is taken per interleaved pair (the order alternates between repeats) and summarised by the median
and the min–max over repeats. The engine's time is also split into generate (``policy.generate``),
prompts (chat template + tokenising), env (env steps and rewards) and other. Critic features
are computed by the learner at update time, not by the engine (see update_split.py).

Models: (a) the embedded tiny model (``marft_agents/assets/tiny-math``), a named real model
(``--model smollm2-135m-instruct``; name it with ``--skip-30m`` to measure it alone), or a randomly initialised stand-in of the same shape (hidden 128, 4 layers, 4 heads, FF 512) with a BPE
tokenizer built the same way; (b) a ~30 M-parameter randomly initialised Llama (hidden 512, 8 layers,
8 heads, FF 1792) with the same tokenizer. Random models rarely emit the end-of-turn token, so they
generate ``max_new_tokens`` almost every time. Results go to ``benchmarks/results/rollout_throughput.json``.

Threads: 1 by default. On a 2-core machine shared with another job, a 2-thread torch process stalls
in OpenMP barriers whenever the other job takes a core (single runs were 20-70x slower than
uncontended ones); one thread degrades gracefully, and the engine/bare ratio is what is compared.
``--threads 0`` uses torch's default. Each run records CPU seconds / wall seconds: near the thread
count means the cores were ours.

Other scripts in this folder import :func:`resolve_model` from here.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import torch  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402

import marft_envs  # noqa: E402
from marft_agents import LaMASPolicy, RolloutEngine, Sampling, TrainConfig, embedded_model_path, load_base  # noqa: E402
from marft_agents.engines import make_engine  # noqa: E402
from marft_agents.models import lm  # noqa: E402  (internal: the sampling mechanics this benchmark compares)
from marft_agents.models.policy import EMBEDDED  # noqa: E402

RESULTS = Path(__file__).parent / "results"
ENV_ID = "marft/MathChain-v0"
TINY_SHAPE = dict(hidden_size=128, num_layers=4, num_heads=4, intermediate_size=512)
MID_SHAPE = dict(hidden_size=512, num_layers=8, num_heads=8, intermediate_size=1792)


# ---- which model ------------------------------------------------------------------------------------


def embedded_available() -> bool:
    return (embedded_model_path() / "config.json").is_file()


def build_stand_in(out_dir: Path, seed: int = 0) -> Path:
    """A random model of the embedded shape, with the tokenizer the pre-training would build, saved to ``out_dir``."""
    from marft_agents.models.tiny import build_model, build_tokenizer
    from marft_agents.pretraining.sft_data import tokenizer_corpus

    tokenizer = build_tokenizer(tokenizer_corpus(3000, seed))
    model = build_model(tokenizer, seed=seed, **TINY_SHAPE)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir


def resolve_model(choice: str | None, tmp: Path) -> tuple[str, str]:
    """``(what load_base takes, a label for the output)`` for ``--model``.

    ``None``: the embedded model when it exists, else a random stand-in of its shape built into ``tmp``.
    ``"embedded"``: the embedded model (an error when it is missing). ``"random"``: the stand-in.
    A named model (``marft models list``): its verified cached folder (fetched on first use).
    Anything else: a directory saved with ``save_pretrained``.
    """
    from marft_agents.models import named

    if choice in named.REGISTRY:
        return named.resolve(choice), f"{choice} (named model; {named.lookup(choice).name} in the marft cache)"
    if choice in (None, EMBEDDED) and embedded_available():
        return EMBEDDED, f"embedded ({embedded_model_path()})"
    if choice == EMBEDDED:
        raise SystemExit(f"--model embedded: no model at {embedded_model_path()} yet; pass a PATH or 'random'")
    if choice in (None, "random"):
        path = build_stand_in(tmp / "stand-in")
        why = "" if choice == "random" else " because the embedded model is not there yet"
        return str(path), (f"random stand-in: untrained Llama of the embedded shape (d128, 4 layers, 4 heads, FF 512), used{why}")
    if not (Path(choice).expanduser() / "config.json").is_file():
        raise SystemExit(f"--model {choice}: no config.json there")
    return choice, f"{choice} (local directory)"


# ---- the two sides ----------------------------------------------------------------------------------


def run_engine(policy: LaMASPolicy, envs: list, max_new_tokens: int, seed: int, merge_lora: bool = False) -> dict:
    engine = RolloutEngine(
        policy, Sampling(temperature=1.0, max_new_tokens=max_new_tokens), engine=make_engine("hf", policy, merge_lora=merge_lora)
    )
    torch.manual_seed(seed)
    c0, t0 = time.process_time(), time.perf_counter()
    episodes = engine.collect(envs, range(len(envs)))
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    n_layers = {len(e.steps) for e in episodes}
    assert n_layers == {2}, f"expected 2 agent-steps per episode, got {n_layers}"
    prompts = [[e.steps[k].prompt for e in episodes] for k in range(2)]  # the batches, in engine order
    tokens = sum(len(s.response) for e in episodes for s in e.steps)
    timings = dict(engine.timings)
    timings["other"] = wall - sum(timings.values())
    return {
        "wall_s": wall,
        "tokens": tokens,
        "tok_per_s": tokens / wall,
        "generate_calls": engine.generate_calls,
        "cpu_over_wall": cpu / wall,
        "timings": timings,
        "prompts": prompts,
    }


def run_bare(model, prompts: list[list[list[int]]], pad_id: int, eos_id: int, max_new_tokens: int, seed: int) -> dict:
    config = lm.sampling_config(max_new_tokens, 1.0, pad_id, eos_id)  # the engine's knobs, no logits kept
    torch.manual_seed(seed)
    tokens = 0
    c0, t0 = time.process_time(), time.perf_counter()
    with torch.no_grad():
        for batch in prompts:
            ids, mask = lm.left_pad(batch, pad_id)
            out = model.generate(input_ids=ids, attention_mask=mask, generation_config=config)
            # real response tokens: up to and including the first end-of-turn token (all of them when none)
            tokens += sum(lm.response_lengths(out.sequences[:, ids.shape[1] :], eos_id))
    wall = time.perf_counter() - t0
    return {"wall_s": wall, "tokens": tokens, "tok_per_s": tokens / wall, "cpu_over_wall": (time.process_time() - c0) / wall}


def spread(xs: list[float]) -> dict:
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "values": xs}


def per_cpu_second(side: dict) -> float:
    """Tokens per CPU second: on shared cores wall time is mostly waiting for a core, CPU time is the work."""
    return side["tokens"] / (side["wall_s"] * side["cpu_over_wall"])


def bench_model(
    name: str,
    label: str,
    model,
    tokenizer,
    batch_sizes: list[int],
    repeats: int,
    max_new_tokens: int,
    lora_targets: tuple[str, ...] = ("q_proj", "v_proj"),
    merge_lora: bool = False,
) -> dict:
    """Interleaved engine/bare runs for one model; returns the JSON record (and prints progress)."""
    bare = copy.deepcopy(model).eval().requires_grad_(False)  # same weights, no peft wrapper
    probe = marft_envs.make(ENV_ID)
    policy = LaMASPolicy(model, tokenizer, probe.possible_agents, mode="lora", lora_targets=lora_targets)
    n_params = sum(p.numel() for p in bare.parameters())
    pad_id, eos_id = tokenizer.pad_token_id, tokenizer.eos_token_id
    record = {
        "model": name,
        "label": label,
        "parameters": n_params,
        "lora_targets": list(lora_targets),
        "dtype": str(next(bare.parameters()).dtype),
        "cases": [],
    }
    print(f"\n[{name}] {label}; {n_params:,} parameters; torch threads {torch.get_num_threads()}", flush=True)
    for b in batch_sizes:
        envs = [marft_envs.make(ENV_ID) for _ in range(b)]
        seed = 1000 + b
        # warm-up (also fixes the prompts: same env seeds and torch seed give the same episodes every time)
        warm = run_engine(policy, envs, max_new_tokens, seed)
        run_bare(bare, warm["prompts"], pad_id, eos_id, max_new_tokens, seed)
        pairs = []
        for r in range(repeats):
            sides = ("engine", "merged", "bare") if merge_lora else ("engine", "bare")
            order = sides[r % len(sides) :] + sides[: r % len(sides)]  # rotates each repeat
            res = {}
            for side in order:
                if side == "engine":
                    res["engine"] = run_engine(policy, envs, max_new_tokens, seed)
                elif side == "merged":
                    res["merged"] = run_engine(policy, envs, max_new_tokens, seed, merge_lora=True)
                    res["merged"].pop("prompts")
                else:
                    res["bare"] = run_bare(bare, warm["prompts"], pad_id, eos_id, max_new_tokens, seed)
            same_prompts = res["engine"].pop("prompts") == warm["prompts"]
            res["same_prompts_as_warmup"] = same_prompts
            res["ratio"] = res["engine"]["tok_per_s"] / res["bare"]["tok_per_s"]
            res["ratio_cpu"] = per_cpu_second(res["engine"]) / per_cpu_second(res["bare"])
            if merge_lora:
                res["ratio_merged"] = res["merged"]["tok_per_s"] / res["bare"]["tok_per_s"]
                res["ratio_cpu_merged"] = per_cpu_second(res["merged"]) / per_cpu_second(res["bare"])
                print(
                    f"  B={b:3d} rep {r}: merged {res['merged']['tok_per_s']:7.0f} tok/s ({res['merged']['tokens']} tok), "
                    f"ratio {res['ratio_merged']:.3f} (per CPU s {res['ratio_cpu_merged']:.3f})",
                    flush=True,
                )
            res["order"] = list(order)
            pairs.append(res)
            print(
                f"  B={b:3d} rep {r}: engine {res['engine']['tok_per_s']:7.0f} tok/s ({res['engine']['tokens']} tok), "
                f"bare {res['bare']['tok_per_s']:7.0f} tok/s ({res['bare']['tokens']} tok), "
                f"ratio {res['ratio']:.3f} (per CPU s {res['ratio_cpu']:.3f}); cpu/wall {res['engine']['cpu_over_wall']:.2f}/{res['bare']['cpu_over_wall']:.2f}, "
                f"load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
        eng = [p["engine"] for p in pairs]
        case = {
            "batch_size": b,
            "max_new_tokens": max_new_tokens,
            "engine_tok_per_s": spread([e["tok_per_s"] for e in eng]),
            "bare_tok_per_s": spread([p["bare"]["tok_per_s"] for p in pairs]),
            "ratio_engine_over_bare": spread([p["ratio"] for p in pairs]),
            "ratio_cpu_engine_over_bare": spread([p["ratio_cpu"] for p in pairs]),
            "engine_wall_s": spread([e["wall_s"] for e in eng]),
            "bare_wall_s": spread([p["bare"]["wall_s"] for p in pairs]),
            "engine_breakdown_s": {k: spread([e["timings"][k] for e in eng]) for k in eng[0]["timings"]},
            # generate-only throughput: tokens / seconds inside policy.generate (peft + logits, no prompts/env)
            "engine_generate_only_ratio": spread(
                [p["engine"]["tokens"] / p["engine"]["timings"]["generate"] / p["bare"]["tok_per_s"] for p in pairs]
            ),
            "cpu_over_wall_engine": [e["cpu_over_wall"] for e in eng],
            "cpu_over_wall_bare": [p["bare"]["cpu_over_wall"] for p in pairs],
            "tokens_engine": [e["tokens"] for e in eng],
            "tokens_bare": [p["bare"]["tokens"] for p in pairs],
            "tokens_equal": all(p["engine"]["tokens"] == p["bare"]["tokens"] for p in pairs),
            "mean_response_tokens": eng[0]["tokens"] / (2 * b),
            "generate_calls_per_collect": eng[0]["generate_calls"],
            "same_prompts_every_repeat": all(p["same_prompts_as_warmup"] for p in pairs),
            "pairs": pairs,
        }
        if merge_lora:
            case["ratio_merged_over_bare"] = spread([p["ratio_merged"] for p in pairs])
            case["ratio_cpu_merged_over_bare"] = spread([p["ratio_cpu_merged"] for p in pairs])
            case["tokens_merged"] = [p["merged"]["tokens"] for p in pairs]
        record["cases"].append(case)
    return record


def table(records: list[dict], goal: float) -> str:
    head = (
        f"{'model':<9} {'params':>11} {'B':>4} {'tok/resp':>8} {'engine tok/s':>13} {'bare tok/s':>11} "
        f"{'ratio (min-max)':>20} {'per CPU s (min-max)':>20} {'gen-only':>8}  "
        f"{'engine split: generate / prompts / env / other (s)'}"
    )
    lines = [head, "-" * len(head)]
    for rec in records:
        for c in rec["cases"]:
            r, rc = c["ratio_engine_over_bare"], c["ratio_cpu_engine_over_bare"]
            bd = c["engine_breakdown_s"]
            total = sum(bd[k]["median"] for k in bd)
            split = " / ".join(f"{bd[k]['median']:.3f} ({bd[k]['median'] / total:4.0%})" for k in ("generate", "prompts", "env", "other"))
            lines.append(
                f"{rec['model']:<9} {rec['parameters']:>11,} {c['batch_size']:>4} {c['mean_response_tokens']:>8.1f} "
                f"{c['engine_tok_per_s']['median']:>13.0f} {c['bare_tok_per_s']['median']:>11.0f} "
                f"{r['median']:>7.3f} ({r['min']:.3f}-{r['max']:.3f}) {rc['median']:>7.3f} ({rc['min']:.3f}-{rc['max']:.3f}) "
                f"{c['engine_generate_only_ratio']['median']:>8.3f}  {split}" + ("" if c["tokens_equal"] else "  [token counts differ]")
            )
    lines.append(
        f"ratio = engine tok/s / bare tok/s per interleaved pair (goal >= {goal}); per CPU s: the same with "
        "tokens per CPU second (the steadier figure on shared cores); gen-only = tokens / "
        "seconds inside policy.generate, over bare; medians of the repeats"
    )
    lines.append(
        "cpu/wall near the thread count means the cores were ours; well below it means another job shared them (see the JSON per pair)"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="embedded | PATH | random (default: embedded if present, else random)")
    parser.add_argument("--batch-sizes", default="16,64")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")
    parser.add_argument("--skip-30m", action="store_true", help="only the --model model (no 30M random Llama)")
    parser.add_argument(
        "--lora-targets",
        default="q_proj,v_proj",
        help="modules the engine's LoRA adapters wrap ('all': the trainer's default, every linear layer)",
    )
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"], help="the base's dtype")
    parser.add_argument("--merge-lora", action="store_true", help="also the engine with generation.merge_lora (a third side, interleaved)")
    parser.add_argument("--out", default=None, help="default: benchmarks/results/rollout_throughput[-<named model>].json")
    args = parser.parse_args(argv)
    from marft_agents.models import named

    args.out = args.out or str(
        RESULTS / (f"rollout_throughput-{args.model}.json" if args.model in named.REGISTRY else "rollout_throughput.json")
    )
    if args.threads:
        torch.set_num_threads(args.threads)
    batch_sizes = [int(x) for x in args.batch_sizes.split(",")]
    goal = 0.9
    started = time.perf_counter()
    records = []
    with tempfile.TemporaryDirectory(prefix="marft-bench-") as tmp:
        path, label = resolve_model(args.model, Path(tmp))
        model, tokenizer = load_base(path, dtype=getattr(torch, args.dtype))
        targets = (
            tuple(TrainConfig().lora_targets) if args.lora_targets == "all" else tuple(t.strip() for t in args.lora_targets.split(","))
        )
        name = "tiny" if args.model in (None, EMBEDDED, "random") or Path(args.model).exists() else args.model
        records.append(bench_model(name, label, model, tokenizer, batch_sizes, args.repeats, args.max_new_tokens, targets, args.merge_lora))
        if not args.skip_30m:
            from marft_agents.models.tiny import build_model

            tok = AutoTokenizer.from_pretrained(path if path != EMBEDDED else str(embedded_model_path()))
            mid = build_model(tok, seed=0, **MID_SHAPE)
            mid_label = (
                f"random Llama d{MID_SHAPE['hidden_size']}, {MID_SHAPE['num_layers']} layers, "
                f"{MID_SHAPE['num_heads']} heads, FF {MID_SHAPE['intermediate_size']}, "
                f"vocab {len(tok)} (tokenizer of {label.split(':')[0].split(' (')[0]})"
            )
            records.append(
                bench_model("30M", mid_label, mid, tok, batch_sizes, args.repeats, args.max_new_tokens, targets, args.merge_lora)
            )
    print()
    print(table(records, goal))
    result = {
        "benchmark": "rollout_throughput",
        "env": ENV_ID,
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "repeats": args.repeats,
        "goal_ratio": goal,
        "wall_s": time.perf_counter() - started,
        "models": records,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(f"written to {args.out} ({result['wall_s']:.0f} s)")
    return result


if __name__ == "__main__":
    main()

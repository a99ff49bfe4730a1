"""Compute-matched baselines for a team on the clean splits, and the one table they make (issue 53).

    .venv/bin/python benchmarks/baselines.py table                       # validation: results/baselines/validation
    .venv/bin/python benchmarks/baselines.py table --out benchmarks/results/baselines/test
    .venv/bin/python benchmarks/baselines.py test_read RUN [RUN ...]     # a final setting's one read of test
    .venv/bin/python benchmarks/baselines.py --smoke                     # the whole path on the embedded model

The runs are ``benchmarks/learning.py``'s ``b_*`` phases (their rules are in its docstring, written before
they run); this script holds what they share and reads their folders back:

* :func:`majority_run`, the majority-vote baseline (self-consistency, Wang et al. 2023:
  :mod:`marft_agents.rollout.majority`) of the untuned single agent, its k matched to a team's measured
  mean generated tokens per problem on the same problems (:func:`team_tokens`);
* :func:`test_read`, the one evaluation of a final setting's adapters on the test split (a run trains and
  chooses on validation); it refuses a second read of the same run;
* :func:`table`, which prints and saves ``table.md`` (and ``table.json``): per method, the problems, the
  split, the accuracy with its 95 % interval (a t-interval over seeds where there are seeds, the Wilson
  interval of one evaluation where there is one run) and the mean generated tokens per problem of its
  evaluation, and the machine kind of each seed (:func:`machine_kind`); then each method against the team
  (``b_marft_*``; on a split that holds none of its runs, ``b_marft_xeon_*``): the paired difference over shared
  seeds with its 95 % t-interval and paired-t p, and the exact McNemar test of their per-problem outcomes, seed
  by seed (:mod:`marft_agents.runs.stats`). A one-run method with no seed of its own (a greedy untuned
  evaluation, the same for every seed) is set against every seed of the team. Where a method's seeds ran on
  another machine kind than the team's, it is also set against today's setting run on its own kind, seed by seed
  (:func:`same_kind_row`). Last, each trained method against its own greedy start (:func:`gain_row`), paired the
  same way.

Every folder it reads holds ``summary.json`` (``eval_after``: the run's last evaluation) and
``outcomes/eval_after.jsonl`` (one line per problem; an untrained run's one evaluation is ``eval_before.jsonl``), as a
training run writes them; a trained run's ``eval_before`` (summary and outcomes) is its start.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

OUT = Path(__file__).parent / "results" / "baselines"
SETTINGS = ("jigsaw", "jigsaw_l2", "chain")


def methods(setting: str) -> list[tuple[str, str]]:
    """The table's rows for ``setting``: (run-folder prefix, what the method is), the team (``b_marft_*``) second."""
    jigsaw = setting.startswith("jigsaw")
    single = f"b_full_info_{setting}" if jigsaw else "b_solo_chain"
    alone = "one agent, the whole problem" if jigsaw else "one agent (MathSolo-v1)"
    return [
        (f"b_untuned_{setting}", "the untuned team, greedy"),
        (f"b_marft_{setting}", "the team trained with MARFT (an adapter per role)"),
        (f"b_shared_{setting}", "one policy writing every role (adapter_mode=shared), MARFT"),
        (single, f"{alone}, untuned, greedy"),
        (f"b_ppo_{setting}", f"{alone}, trained with PPO, the team's episodes"),
        (f"b_majority_{setting}", f"{alone}, untuned: majority vote at the untuned team's tokens"),
        (f"b_majority_marft_{setting}", f"{alone}, untuned: majority vote at the trained team's tokens"),
        (f"b_epochs_{setting}", "the team, MARFT with 4 epochs of minibatches of 8 (the PPO regime)"),
        (f"b_anchor_{setting}", "the same with a KL anchor to the base (kl_coef 0.05)"),
        (f"b_epochs_slow_{setting}", "the team, MARFT, the same PPO regime at lr 3e-4 / 16 (no anchor)"),
        (f"b_tis_{setting}", "the team, MARFT, the behaviour log-probs recomputed by the learner, TIS cap 2 (bf16)"),
        (f"b_learner_old_{setting}", "the team, MARFT, the update's own log-probs as the first step's pi_old (bf16)"),
        (f"b_marft_xeon_{setting}", "the team trained with MARFT, run again on an Intel Xeon (AMX): the machine kind alone"),
    ]


def team_prefixes(setting: str) -> tuple[str, str]:
    """Today's setting's run-folder prefixes, the team first: ``b_marft_*``; on a split that holds none of its runs,
    its runs on the Xeon (level 1's test read, amendment 12: the AMD runs' adapters stayed on that machine)."""
    return f"b_marft_{setting}", f"b_marft_xeon_{setting}"


def team_runs(out: Path, setting: str) -> list[Path]:
    """The team's run folders in ``out``: the first prefix of :func:`team_prefixes` with any."""
    for prefix in team_prefixes(setting):
        runs = sorted(d for d in out.glob(f"{prefix}_s*") if re.fullmatch(rf"{re.escape(prefix)}_s\d+", d.name))
        if runs:
            return runs
    return []


# ---- the runs -------------------------------------------------------------------------------------


def eval_tokens(result: dict) -> float:
    """An evaluation's mean generated tokens per problem: its ``mean_tokens``; for a summary written before that
    key, its agents' mean response tokens summed (one round, one action each)."""
    if "mean_tokens" in result:
        return float(result["mean_tokens"])
    if result.get("mean_rounds", 1.0) != 1.0:
        raise ValueError("this evaluation has several rounds and no mean_tokens: evaluate it again with this library")
    return float(sum(r["mean_response_tokens"] for r in result["roles"].values()))


def team_tokens(run_dirs: list[Path], which: str = "eval_after") -> float:
    """The mean over ``run_dirs`` (a team's seeds) of their evaluation ``which``'s mean generated tokens per problem."""
    summaries = [run / "summary.json" for run in run_dirs]
    missing = [str(s) for s in summaries if not s.is_file()]
    if not summaries or missing:
        raise FileNotFoundError(f"a token budget needs the team's finished runs; missing: {missing or 'every run'}")
    return statistics.fmean(eval_tokens(json.loads(s.read_text())[which]) for s in summaries)


def write_result(run_dir: Path, result: dict, **fields) -> None:
    """A run-like folder for an evaluation that is no training run: ``summary.json`` (``eval_after``: ``result``
    without its outcomes, and ``fields``) and ``outcomes/eval_after.jsonl``."""
    (run_dir / "outcomes").mkdir(parents=True, exist_ok=True)
    lines = result.pop("outcomes", [])
    (run_dir / "outcomes" / "eval_after.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (run_dir / "summary.json").write_text(json.dumps({**fields, "eval_after": result}, indent=2))


def _timed(run_dir: Path, started: float, cpu: float) -> None:
    import roofline  # beside this file

    timing = run_dir.parent / f"{run_dir.name}.timing.jsonl"
    with timing.open("a") as f:
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        # bf16 rounds by machine kind: name it beside the seconds
        f.write(json.dumps({"wall_s": wall, "cpu_s": cpu, "resumed": False, "cpu": roofline.cpu()}) + "\n")


def majority_run(
    run_dir: Path,
    *,
    env: str,
    env_kwargs: dict,
    budget: float,
    budget_from: str,
    n: int,
    split: str,
    seed: int,
    temperature: float,
    max_new_tokens: int,
    max_k: int,
    model: str,
    threads: int,
    dtype: str,
    lean_decode: bool = True,
) -> dict:
    """The untuned ``model``'s majority vote on ``env`` at ``budget`` generated tokens per problem (``budget_from``
    says whose), sampled at ``temperature`` from draws seeded by ``seed`` (``lean_decode``: ``generation.lean_decode``);
    written as :func:`write_result` does."""
    if (run_dir / "summary.json").is_file():
        print(f"  already done: {run_dir} (its summary.json exists; move the folder away to run it again)", flush=True)
        return json.loads((run_dir / "summary.json").read_text())
    import torch

    import marft_envs
    from marft_agents import TrainConfig, build_policy
    from marft_agents.engines.config import EngineConfig, EvalSampling
    from marft_agents.rollout.majority import evaluate_majority

    torch.set_num_threads(threads)
    generation = EngineConfig(lean_decode=lean_decode)
    config = TrainConfig(model=model, env=env, env_kwargs=env_kwargs, threads=threads, dtype=dtype, generation=generation)
    policy = build_policy(config, marft_envs.make(env, **env_kwargs).possible_agents)
    started, cpu = time.perf_counter(), time.process_time()
    with torch.no_grad():
        result = evaluate_majority(
            policy,
            env,
            env_kwargs,
            n,
            sampling=EvalSampling(temperature=temperature, seed=seed),
            tokens=budget,
            max_k=max_k,
            max_new_tokens=max_new_tokens,
            split=split,
            outcomes=True,
        )
    fields = {"env": env, "env_kwargs": env_kwargs, "model": model, "seed": seed, "token_budget_from": budget_from}
    write_result(run_dir, result, **fields)
    _timed(run_dir, started, cpu)
    print(
        f"  {run_dir.name}: majority@{result['k']} {result['accuracy']:.1%} at {result['mean_tokens']:.1f} tokens per problem "
        f"(budget {budget:.1f}; one sample {result['sample_accuracy']:.1%})",
        flush=True,
    )
    return result


def test_read(run_dir: Path, out: Path, threads: int = 2, episodes: int | None = None) -> dict:
    """A final setting's one read of test: ``run_dir``'s latest adapters, greedy, on its env's test split (as many
    problems as its own evaluations, or ``episodes``: a test split smaller than validation, such as ``synthetic:0``'s
    86 problems against 104, is read whole that way), written to ``out/<run name>/``; a second read of the same run
    is refused."""
    dest = out / run_dir.name
    if (dest / "summary.json").is_file():
        raise SystemExit(f"{dest} exists: the test split is read once per final setting (move it away only to redo a failed read)")
    import torch

    from marft_agents import policy_from_run
    from marft_agents.rollout.evaluation import evaluate
    from marft_agents.settings.agents import values

    # the LoRA branches and the decoding as the run computed them (a run written before lora_compute existed: float32;
    # before generation.lean_decode: the model's forward)
    ran = json.loads((run_dir / "config.json").read_text())
    lora, lean = ran.get("lora_compute", "float32"), ran.get("generation", {}).get("lean_decode", False)
    overrides = [f"threads={threads}", f"lora_compute={lora}", f"generation.lean_decode={str(lean).lower()}"]
    policy, config = policy_from_run(str(run_dir), overrides=overrides)
    started, cpu = time.perf_counter(), time.process_time()
    try:
        with torch.no_grad():
            result = evaluate(
                policy,
                config.env,
                config.env_kwargs,
                config.eval_episodes if episodes is None else episodes,
                max_new_tokens=config.max_new_tokens,
                agent_max_new_tokens=values(config.agents, "max_new_tokens"),
                stop=tuple(config.stop),
                agent_stop=values(config.agents, "stop"),
                split="test",
                outcomes=True,
            )
    except ValueError as err:  # e.g. a test split smaller than the run's evaluations; nothing is written
        raise SystemExit(f"{run_dir.name}: {err} (test_read --episodes N reads N problems)") from None
    write_result(dest, result, env=config.env, env_kwargs=config.env_kwargs, read_from=str(run_dir))
    _timed(dest, started, cpu)
    print(f"  {dest.name}: test {result['accuracy']:.1%} on {result['episodes']} problems", flush=True)
    return result


# ---- the table ------------------------------------------------------------------------------------


def runs_of(out: Path, prefix: str) -> dict[int, dict]:
    """Seed -> ``{"eval": its last evaluation, "fixed": untrained and greedy (the same on every seed), "outcomes": its
    per-problem lines or None}`` of ``prefix``'s runs."""
    found = {}
    for run in sorted(out.glob(f"{prefix}_s*")):
        seed = re.fullmatch(rf"{re.escape(prefix)}_s(\d+)", run.name)
        if not seed or not (run / "summary.json").is_file():
            continue
        summary = json.loads((run / "summary.json").read_text())
        lines = run / "outcomes" / "eval_after.jsonl"
        if not lines.is_file() and summary.get("updates") == 0:  # an untrained run's one evaluation is its "before"
            lines = run / "outcomes" / "eval_before.jsonl"
        start = run / "outcomes" / "eval_before.jsonl"
        trained = summary.get("updates", 0) > 0 and "eval_before" in summary
        found[int(seed.group(1))] = {
            "kind": machine_kind(run),
            "eval": summary["eval_after"],
            "fixed": summary.get("updates") == 0 and summary["eval_after"].get("decoding", "greedy") == "greedy",
            "outcomes": _lines(lines),
            # a trained run's own greedy start: the same process and code as its last evaluation
            "start": {"eval": summary["eval_before"], "outcomes": _lines(start)} if trained else None,
        }
    return found


def machine_kind(run: Path) -> str:
    """The machine kind ``run`` computed on, from its ``.timing.jsonl``: the CPU's model and its bf16 flags (bf16
    matmuls round by kind, so a run on another kind is another draw: amendment 8 of ``benchmarks/learning.py``);
    "not recorded" for a run timed before the record existed, "mixed" for a run resumed on another kind."""
    timing = run.parent / f"{run.name}.timing.jsonl"
    kinds = set()
    for line in timing.read_text().splitlines() if timing.is_file() else []:
        cpu = json.loads(line).get("cpu")
        if cpu is None:
            kinds.add("not recorded")
            continue
        bf16 = "+".join(f for f in cpu["flags"] if "bf16" in f) or "no bf16"
        kinds.add(f"{cpu['model']}, {bf16}")
    return kinds.pop() if len(kinds) == 1 else "mixed" if kinds else "not recorded"


def _lines(path: Path) -> list[dict] | None:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.is_file() else None


def accuracy_interval(runs: dict[int, dict]):
    """The accuracy's 95 % interval: over seeds (t) with two runs or more, else one run's Wilson interval."""
    from marft_agents.runs import stats

    if len(runs) > 1:
        return stats.t_interval(r["eval"]["accuracy"] for r in runs.values()), f"t, {len(runs)} seeds"
    (run,) = runs.values()
    n = run["eval"]["episodes"]
    return stats.wilson(round(run["eval"]["accuracy"] * n), n), "Wilson, 1 run"


def method_row(title: str, runs: dict[int, dict]) -> dict:
    """One method's row of the table, as data."""
    interval, kind = accuracy_interval(runs)
    evals = [r["eval"] for r in runs.values()]
    problems = sorted({e["episodes"] for e in evals})
    ks = sorted({e["k"] for e in evals if "k" in e})
    return {
        "method": title + (f" (k {', '.join(map(str, ks))})" if ks else ""),
        "seeds": sorted(runs),
        "problems": "-".join(map(str, problems)),
        "split": ", ".join(sorted({str(e.get("split")) for e in evals})),
        "accuracy": interval.estimate,
        "low": max(0.0, interval.low),  # an accuracy lies in [0, 1]: a t-interval past its ends is clipped to them
        "high": min(1.0, interval.high),
        "interval": kind,
        "tokens": statistics.fmean(eval_tokens(e) for e in evals),
        "machines": _kinds(runs),
    }


def _kinds(runs: dict[int, dict]) -> str:
    """Each machine kind of ``runs`` with its seeds, e.g. ``not recorded (0,1); Intel(R) Xeon(R) ..., amx_bf16 (2)``."""
    by_kind: dict[str, list[int]] = {}
    for seed, run in sorted(runs.items()):
        by_kind.setdefault(run["kind"], []).append(seed)
    return "; ".join(f"{k} ({','.join(map(str, seeds))})" for k, seeds in by_kind.items())


def paired_row(title: str, team: dict[int, dict], other: dict[int, dict]) -> dict | None:
    """The team against one method: the paired difference over the seeds they share and McNemar's exact test of
    their outcomes, seed by seed. A method of one untrained greedy run (the same on every seed) is set against
    every seed of the team."""
    fixed = next(iter(other.values())) if len(other) == 1 and next(iter(other.values()))["fixed"] else None
    return _paired(title, {s: (team[s], other.get(s, fixed)) for s in team if s in other or fixed})


def same_kind_row(title: str, teams: list[dict[int, dict]], other: dict[int, dict]) -> dict | None:
    """The team against one method where the machine kind changes the pairing (order amendment 12 of
    ``benchmarks/learning.py``): each seed of ``other`` against the first of ``teams`` (today's setting, run on
    several kinds) that ran the same seed on the same kind; ``None`` when that is the plain pairing of
    :func:`paired_row` on every seed (or no seed has a match)."""
    pairs = {}
    for seed, run in other.items():
        match = [team[seed] for team in teams if seed in team and team[seed]["kind"] == run["kind"]]
        if match:
            pairs[seed] = (match[0], run)
    plain = teams[0] if teams else {}
    if all(plain.get(seed) is team for seed, (team, _) in pairs.items()):
        return None
    return _paired(title, pairs)


def gain_row(title: str, runs: dict[int, dict]) -> dict | None:
    """A trained method's last evaluation against its own greedy start, seed by seed (order amendment 2 of
    ``benchmarks/learning.py``: the same process and code on both sides, where the untuned rows may have run on
    other code)."""
    return _paired(title, {s: (r, r["start"]) for s, r in runs.items() if r.get("start")})


def _paired(title: str, pairs: dict[int, tuple[dict, dict]]) -> dict | None:
    """``a`` minus ``b`` over the seeds of ``pairs`` (seed -> (a, b), each with ``eval`` and ``outcomes``): the
    paired t-test and McNemar's exact test per seed."""
    from marft_agents.runs import stats

    if not pairs:
        return None
    test = stats.paired_t([a["eval"]["accuracy"] for a, _ in pairs.values()], [b["eval"]["accuracy"] for _, b in pairs.values()])
    mcnemar = {}
    for seed, (a, b) in pairs.items():
        if a["outcomes"] is not None and b["outcomes"] is not None:
            m = stats.mcnemar(*stats.pair_outcomes(a["outcomes"], b["outcomes"]))
            mcnemar[seed] = {"only_team": m.only_a, "only_other": m.only_b, "p": m.p}
    d = test.difference
    return {
        "method": title,
        "seeds": sorted(pairs),
        "difference": d.estimate,
        "low": d.low,
        "high": d.high,
        "p": test.p,
        "mcnemar": mcnemar,
    }


def _pct(x: float) -> str:
    return "n/a" if x != x else f"{100 * x:.1f}"


def _points(x: float) -> str:
    return "n/a" if x != x else f"{100 * x:+.1f}"


def table(out: Path, settings: tuple[str, ...] = SETTINGS) -> str:
    """Print-ready ``table.md`` of every setting with runs in ``out`` (also written, with ``table.json``)."""
    parts, data = [], {}
    for setting in settings:
        rows = {prefix: (title, runs_of(out, prefix)) for prefix, title in methods(setting)}
        rows = {prefix: (title, runs) for prefix, (title, runs) in rows.items() if runs}
        if not rows:
            continue
        main = [method_row(title, runs) for title, runs in rows.values()]
        homes = [p for p in team_prefixes(setting) if p in rows]
        team = rows[homes[0]][1] if homes else None
        paired = [paired_row(t, team, r) for p, (t, r) in rows.items() if team and p != homes[0]]
        paired = [p for p in paired if p]
        teams = [rows[p][1] for p in homes]
        same = [same_kind_row(t, teams, r) for p, (t, r) in rows.items() if p not in homes]
        same = [p for p in same if p]
        gains = [g for g in (gain_row(t, r) for t, r in rows.values()) if g]
        data[setting] = {
            "team": homes[0] if homes else None,
            "methods": main,
            "against_the_team": paired,
            "against_the_team_same_kind": same,
            "from_own_start": gains,
        }
        parts.append(_markdown(setting, main, paired, gains, same, homes[0] if homes else ""))
    text = "\n\n".join(parts) or f"no b_* runs in {out}"
    out.mkdir(parents=True, exist_ok=True)
    (out / "table.md").write_text(text + "\n")
    (out / "table.json").write_text(json.dumps(data, indent=2))
    return text


def _markdown(setting: str, main: list[dict], paired: list[dict], gains: list[dict] = (), same: list[dict] = (), team: str = "") -> str:
    lines = [
        f"{setting}: accuracy with its 95 % interval (t over seeds, clipped to 0-100; Wilson for one run), mean generated "
        "tokens per problem of the evaluation, and the machine kind of each seed (its CPU and bf16 flags, from its timing).",
        "",
        "| method | seeds | problems | split | accuracy % | 95 % interval | interval | tokens per problem | machine (seeds) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in main:
        seeds = ",".join(map(str, r["seeds"]))
        lines.append(
            f"| {r['method']} | {seeds} | {r['problems']} | {r['split']} | {_pct(r['accuracy'])} | "
            f"[{_pct(r['low'])}, {_pct(r['high'])}] | {r['interval']} | {r['tokens']:.1f} | {r['machines']} |"
        )
    if paired:
        lines += [
            "",
            f"The team ({team}) against each method: the team minus the method, in points, over the seeds they share (a method of one "
            "untrained greedy run: every team seed); McNemar's exact test per seed (problems only the team / only the method got right).",
            "",
            "| method | seeds | difference (points) | 95 % t-interval | paired t p | McNemar per seed |",
            "|---|---|---|---|---|---|",
        ]
        lines += [_paired_line(r) for r in paired]
    if same:
        lines += [
            "",
            "The team against each method on the same seed and the same machine kind (today's setting from whichever of its "
            "runs computed on the method's kind; rows where that changes the pairing above), as above.",
            "",
            "| method | seeds | difference (points) | 95 % t-interval | paired t p | McNemar per seed |",
            "|---|---|---|---|---|---|",
        ]
        lines += [_paired_line(r) for r in same]
    if gains:
        lines += [
            "",
            "Each trained method from its own start: its last evaluation minus its own greedy untuned evaluation (the same "
            "run and code), in points, paired by seed; McNemar per seed (problems right only after training / only at the start).",
            "",
            "| method | seeds | gain (points) | 95 % t-interval | paired t p | McNemar per seed |",
            "|---|---|---|---|---|---|",
        ]
        lines += [_paired_line(r) for r in gains]
    return "\n".join(lines)


def _paired_line(r: dict) -> str:
    mc = "; ".join(f"s{s}: {m['only_team']}/{m['only_other']}, p {m['p']:.3f}" for s, m in r["mcnemar"].items()) or "n/a"
    p = "n/a" if r["p"] != r["p"] else f"{r['p']:.3f}"
    return (
        f"| {r['method']} | {','.join(map(str, r['seeds']))} | {_points(r['difference'])} | "
        f"[{_points(r['low'])}, {_points(r['high'])}] | {p} | {mc} |"
    )


# ---- the smoke check ------------------------------------------------------------------------------

SMOKE_PHASES = ("b_untuned_jigsaw", "b_marft_jigsaw", "b_full_info_jigsaw", "b_majority_jigsaw", "b_shared_jigsaw")
SMOKE_OTHER_SETTINGS = ("b_untuned_jigsaw_l2", "b_untuned_chain")  # the other settings' envs and options, untrained


def smoke(out: Path) -> str:
    """The jigsaw baselines end to end on the embedded model with tiny budgets (not a result), the other settings'
    untuned teams, the jigsaw table, then a test read of the team's seed 0 (3 problems, into ``out/test``)."""
    sys.path.insert(0, str(Path(__file__).parent))
    import learning

    learning._smoke()
    learning.EVAL_N, learning.EPISODES, learning.F4_UPDATES, learning.MAX_VOTES = 4, 4, 1, 3
    for phase in SMOKE_PHASES:
        for seed in (0, 1) if phase in ("b_marft_jigsaw", "b_majority_jigsaw") else (0,):
            learning.PHASES[phase](out, seed)
    for phase in SMOKE_OTHER_SETTINGS:
        learning.PHASES[phase](out, 0)
    text = table(out, ("jigsaw",))
    test_read(out / "b_marft_jigsaw_s0", out / "test", episodes=3)
    return text


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("command", nargs="?", choices=("table", "test_read"), default="table")
    p.add_argument("runs", nargs="*", type=Path, help="test_read: the final settings' run folders")
    p.add_argument("--out", type=Path, default=None, help="results folder (table: validation's; test_read: test's)")
    p.add_argument("--episodes", type=int, default=None, help="test_read: problems to read (default: as many as the run's evaluations)")
    p.add_argument("--smoke", action="store_true", help="the jigsaw baselines on the embedded model in tiny budgets, in a temporary folder")
    args = p.parse_args(argv)
    if args.smoke:
        if args.out is None:
            with tempfile.TemporaryDirectory() as tmp:
                print(smoke(Path(tmp)))
        else:
            print(smoke(args.out))
    elif args.command == "test_read":
        if not args.runs:
            p.error("test_read needs the run folders of the final settings")
        for run in args.runs:
            test_read(run, args.out or OUT / "test", episodes=args.episodes)
    else:
        print(table(args.out or OUT / "validation"))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""benchmarks/baselines.py (the compute-matched baselines' table) and benchmarks/intervals.py (what holds at 95 %):
their tables from hand-made run folders, the committed results' intervals, and a smoke run on the embedded model."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"


@pytest.fixture
def scripts(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import baselines
    import intervals

    return baselines, intervals


def _run(folder: Path, accuracy: float, right: list[bool], updates: int = 16, **extra) -> None:
    (folder / "outcomes").mkdir(parents=True)
    lines = [{"uid": f"p{i}", "correct": r} for i, r in enumerate(right)]
    (folder / "outcomes" / "eval_after.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    result = {"episodes": len(right), "accuracy": accuracy, "split": "validation", "mean_tokens": 40.0, **extra}
    if result["mean_tokens"] is None:  # a summary written before mean_tokens
        del result["mean_tokens"]
    (folder / "summary.json").write_text(json.dumps({"updates": updates, "eval_after": result}))


def test_the_table_by_hand(tmp_path, scripts):
    baselines, _ = scripts
    team = {0: [1, 1, 1, 0, 0, 0, 0, 0, 0, 0], 1: [1, 1, 1, 1, 0, 0, 0, 0, 0, 0], 2: [1, 1, 1, 1, 1, 0, 0, 0, 0, 0]}
    for seed, right in team.items():
        _run(tmp_path / f"b_marft_jigsaw_s{seed}", sum(right) / 10, [bool(x) for x in right])
    untuned = [True, True, False, False, False, False, False, False, False, False]
    _run(tmp_path / "b_untuned_jigsaw_s0", 0.2, untuned, 0, mean_tokens=None, roles={"sharer_0": {"mean_response_tokens": 15.0}})
    text = baselines.table(tmp_path, ("jigsaw",))
    data = json.loads((tmp_path / "table.json").read_text())["jigsaw"]
    team_row, untuned_row = data["methods"][1], data["methods"][0]
    # three seeds 0.3, 0.4, 0.5: 0.4 ± 4.303 x 0.0577 (sd 0.1 / sqrt 3)
    assert team_row["seeds"] == [0, 1, 2] and team_row["interval"] == "t, 3 seeds"
    assert (team_row["low"], team_row["high"]) == (pytest.approx(0.4 - 0.248414, abs=1e-5), pytest.approx(0.4 + 0.248414, abs=1e-5))
    assert untuned_row["interval"] == "Wilson, 1 run" and untuned_row["low"] == pytest.approx(0.05668, abs=1e-4)
    # one untuned run stands for every seed: differences 0.1, 0.2, 0.3; McNemar: 1, 2 and 3 problems only the team got
    (against,) = data["against_the_team"]
    assert against["seeds"] == [0, 1, 2] and against["difference"] == pytest.approx(0.2)
    assert against["mcnemar"] == {
        "0": {"only_team": 1, "only_other": 0, "p": 1.0},
        "1": {"only_team": 2, "only_other": 0, "p": 0.5},
        "2": {"only_team": 3, "only_other": 0, "p": 0.25},
    }
    assert (
        "| the team trained with MARFT (an adapter per role) | 0,1,2 | 10 | validation | 40.0 | [15.2, 64.8] | t, 3 seeds | 40.0 "
        "| not recorded (0,1,2) |" in text
    )
    assert (tmp_path / "table.md").read_text() == text + "\n"


def test_gains_from_each_runs_own_start(tmp_path, scripts):
    baselines, _ = scripts
    # seed 0: 2 -> 4 right of 5 (problems 2, 3 gained); seed 1: 1 -> 2 (problem 1 gained, problem 0 lost, problem 4 gained)
    starts = {0: [1, 1, 0, 0, 0], 1: [1, 0, 0, 0, 0]}
    ends = {0: [1, 1, 1, 1, 0], 1: [0, 1, 0, 0, 1]}
    for seed in (0, 1):
        run = tmp_path / f"b_ppo_jigsaw_s{seed}"
        _run(run, sum(ends[seed]) / 5, [bool(x) for x in ends[seed]])
        summary = json.loads((run / "summary.json").read_text())
        summary["eval_before"] = {"episodes": 5, "accuracy": sum(starts[seed]) / 5}
        (run / "summary.json").write_text(json.dumps(summary))
        before = [{"uid": f"p{i}", "correct": bool(r)} for i, r in enumerate(starts[seed])]
        (run / "outcomes" / "eval_before.jsonl").write_text("".join(json.dumps(x) + "\n" for x in before))
    text = baselines.table(tmp_path, ("jigsaw",))
    (gain,) = json.loads((tmp_path / "table.json").read_text())["jigsaw"]["from_own_start"]
    # gains 0.4 and 0.2: mean 0.3, sd 0.1414, se 0.1; t(1) 12.706 -> ± 1.2706
    assert gain["seeds"] == [0, 1] and gain["difference"] == pytest.approx(0.3)
    assert (gain["low"], gain["high"]) == (pytest.approx(0.3 - 1.2706, abs=1e-3), pytest.approx(0.3 + 1.2706, abs=1e-3))
    assert gain["mcnemar"]["0"]["only_team"] == 2 and gain["mcnemar"]["0"]["only_other"] == 0
    assert gain["mcnemar"]["1"]["only_team"] == 2 and gain["mcnemar"]["1"]["only_other"] == 1
    assert "| +30.0 | [-97.1, +157.1] |" in text
    # an untrained run has no start of its own, and a run of old code without eval_before is left out
    _run(tmp_path / "b_untuned_jigsaw_s0", 0.2, [True, False, False, False, False], 0)
    baselines.table(tmp_path, ("jigsaw",))
    assert len(json.loads((tmp_path / "table.json").read_text())["jigsaw"]["from_own_start"]) == 1


XEON = {"model": "Intel(R) Xeon(R) Processor", "cores": 2, "flags": ["avx2", "avx512_bf16", "amx_tile", "amx_bf16"]}


def _timed(folder: Path, *cpus) -> None:
    lines = [{"wall_s": 1.0, "cpu_s": 2.0, "resumed": i > 0, **({"cpu": c} if c else {})} for i, c in enumerate(cpus)]
    (folder.parent / f"{folder.name}.timing.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_machine_kinds_from_the_timing(tmp_path, scripts):
    baselines, _ = scripts
    cases = [
        ((XEON,), "Intel(R) Xeon(R) Processor, avx512_bf16+amx_bf16"),
        (({"model": "AMD EPYC", "flags": ["avx2", "fma"]},), "AMD EPYC, no bf16"),
        ((None,), "not recorded"),  # timed before the record existed
        ((XEON, XEON), "Intel(R) Xeon(R) Processor, avx512_bf16+amx_bf16"),  # resumed on the same kind
        ((None, XEON), "mixed"),  # resumed on another kind
    ]
    for i, (cpus, kind) in enumerate(cases):
        _timed(tmp_path / f"run{i}", *cpus)
        assert baselines.machine_kind(tmp_path / f"run{i}") == kind, cpus
    assert baselines.machine_kind(tmp_path / "no_timing") == "not recorded"


def test_the_team_on_the_same_machine_kind(tmp_path, scripts):
    baselines, _ = scripts
    bits = lambda n: [i < n for i in range(10)]  # noqa: E731  (the first n of 10 problems right)
    _run(tmp_path / "b_marft_jigsaw_s0", 0.3, bits(3))  # timed on a kind not recorded
    _run(tmp_path / "b_marft_jigsaw_s1", 0.4, bits(4))
    xeon = [True, True, True, True, False, True, True, True, True, False]
    _run(tmp_path / "b_marft_xeon_jigsaw_s1", 0.8, xeon)
    _timed(tmp_path / "b_marft_xeon_jigsaw_s1", XEON)
    _run(tmp_path / "b_tis_jigsaw_s0", 0.2, bits(2))
    _run(tmp_path / "b_tis_jigsaw_s1", 0.5, bits(5))
    _timed(tmp_path / "b_tis_jigsaw_s1", XEON)
    _run(tmp_path / "b_ppo_jigsaw_s0", 0.1, bits(1))  # one kind, the team's: no second pairing
    text = baselines.table(tmp_path, ("jigsaw",))
    data = json.loads((tmp_path / "table.json").read_text())["jigsaw"]
    assert data["team"] == "b_marft_jigsaw"
    tis = next(r for r in data["methods"] if "TIS" in r["method"])
    assert tis["machines"] == "not recorded (0); Intel(R) Xeon(R) Processor, avx512_bf16+amx_bf16 (1)"
    # by seed alone: 0.3 - 0.2 and 0.4 - 0.5, mean 0
    plain = next(r for r in data["against_the_team"] if "TIS" in r["method"])
    assert plain["difference"] == pytest.approx(0.0, abs=1e-12)
    # by seed and kind: 0.3 - 0.2 and 0.8 - 0.5: mean 0.2, sd 0.1414, se 0.1, t(1) 12.706
    (same,) = data["against_the_team_same_kind"]
    assert "TIS" in same["method"] and same["seeds"] == [0, 1] and same["difference"] == pytest.approx(0.2)
    assert (same["low"], same["high"]) == (pytest.approx(0.2 - 1.2706, abs=1e-3), pytest.approx(0.2 + 1.2706, abs=1e-3))
    # seed 1 on the Xeon: problems 5-8 only the team, problem 4 only TIS; exact two-sided p = 2 x 6/32
    assert same["mcnemar"]["1"] == {"only_team": 4, "only_other": 1, "p": pytest.approx(0.375)}
    assert "on the same seed and the same machine kind" in text and "| +20.0 | [-107.1, +147.1] |" in text


def test_the_team_on_a_split_without_its_first_runs(tmp_path, scripts):
    baselines, _ = scripts
    # level 1's test read (amendment 12): the team's runs on the Xeon, the untuned team's one greedy run
    _run(tmp_path / "b_marft_xeon_jigsaw_s0", 0.5, [True] * 5 + [False] * 5)
    _run(tmp_path / "b_marft_xeon_jigsaw_s1", 0.3, [True] * 3 + [False] * 7)
    _run(tmp_path / "b_untuned_jigsaw_s0", 0.1, [True] + [False] * 9, 0)
    text = baselines.table(tmp_path, ("jigsaw",))
    data = json.loads((tmp_path / "table.json").read_text())["jigsaw"]
    assert data["team"] == "b_marft_xeon_jigsaw" and data["against_the_team_same_kind"] == []
    (against,) = data["against_the_team"]
    assert against["seeds"] == [0, 1] and against["difference"] == pytest.approx(0.3)  # 0.4 and 0.2
    assert "The team (b_marft_xeon_jigsaw) against each method" in text


def test_the_vote_at_the_team_tokens_of_the_xeon_reads(tmp_path, scripts, monkeypatch):
    baselines, _ = scripts
    import learning

    for seed, tokens in ((0, 30.0), (1, 41.0)):  # a test folder with the Xeon team's reads only (amendment 12)
        (tmp_path / f"b_marft_xeon_jigsaw_s{seed}").mkdir()
        (tmp_path / f"b_marft_xeon_jigsaw_s{seed}" / "summary.json").write_text(json.dumps({"eval_after": {"mean_tokens": tokens}}))
    calls = []
    monkeypatch.setattr(baselines, "majority_run", lambda run_dir, **kw: calls.append((run_dir, kw)))
    learning.b_majority(tmp_path, 3, "jigsaw", team="marft")
    ((run_dir, kw),) = calls
    assert run_dir == tmp_path / "b_majority_marft_jigsaw_s3" and kw["budget"] == pytest.approx(35.5)
    assert kw["budget_from"].startswith("b_marft_xeon_jigsaw_s0, b_marft_xeon_jigsaw_s1:")
    # where b_marft_jigsaw's runs are there, they give the budget
    (tmp_path / "b_marft_jigsaw_s0").mkdir()
    (tmp_path / "b_marft_jigsaw_s0" / "summary.json").write_text(json.dumps({"eval_after": {"mean_tokens": 20.0}}))
    learning.b_majority(tmp_path, 3, "jigsaw", team="marft")
    assert calls[-1][1]["budget"] == 20.0


def test_eval_tokens_reads_old_summaries(scripts):
    baselines, _ = scripts
    assert baselines.eval_tokens({"mean_tokens": 31.5, "roles": {}}) == 31.5
    old = {"mean_rounds": 1.0, "roles": {"sharer_0": {"mean_response_tokens": 14.875}, "answerer_0": {"mean_response_tokens": 31.125}}}
    assert baselines.eval_tokens(old) == 46.0
    with pytest.raises(ValueError, match="several rounds"):
        baselines.eval_tokens({**old, "mean_rounds": 2.0})


def test_the_committed_results_intervals(scripts):
    _, intervals = scripts
    if not (intervals.RESULTS / "f1_marft_s2" / "summary.json").is_file():
        pytest.skip("the credit experiments' results are not in this checkout")
    text = intervals.report()
    assert "| F1: MARFT, the chain, both learn | 0,1,2 | +3.6, +29.5, +6.3 | +13.1 ± 8.2 | [-22.3, +48.5] | no | no (+10) |" in text
    assert "| F4: MARFT, T 0.7 | 0,1,2 | +14.3, +12.5, +5.4 | +10.7 ± 2.7 | [-1.0, +22.5] | no | no (+10) |" in text
    assert "| F4: MARFT, T 0.3 | 0,1,2 |" in text and "[+14.0, +28.3] | yes | yes (+10) |" in text


def test_the_smoke_run_on_the_embedded_model(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    out = subprocess.run(
        [sys.executable, str(BENCHMARKS / "baselines.py"), "--smoke", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    data = json.loads((tmp_path / "table.json").read_text())["jigsaw"]
    methods = {r["method"].split(" (k ")[0]: r for r in data["methods"]}
    assert len(methods) == 5 and all(r["split"] == "validation" and r["problems"] == "4" for r in methods.values())
    vote = next(r for r in data["methods"] if r["method"].startswith("one agent, the whole problem, untuned: majority"))
    assert vote["seeds"] == [0, 1] and vote["interval"] == "t, 2 seeds"
    summary = json.loads((tmp_path / "b_majority_jigsaw_s0" / "summary.json").read_text())
    untuned = json.loads((tmp_path / "b_untuned_jigsaw_s0" / "summary.json").read_text())["eval_after"]["mean_tokens"]
    assert summary["eval_after"]["token_budget"] == pytest.approx(untuned)
    assert len((tmp_path / "b_majority_jigsaw_s0" / "outcomes" / "eval_after.jsonl").read_text().splitlines()) == 4
    assert "The team (b_marft_jigsaw) against each method" in out.stdout
    # the other settings' options reach their runs: level 2; the chain's boxed actor (its profile, its stop)
    l2 = json.loads((tmp_path / "b_untuned_jigsaw_l2_s0" / "config.json").read_text())
    assert l2["env"] == "marft/MathJigsaw-v2" and l2["env_kwargs"]["levels"] == [2]
    chain = json.loads((tmp_path / "b_untuned_chain_s0" / "config.json").read_text())
    assert chain["env"] == "marft/MathChain-v1" and chain["env_kwargs"]["profile"] == "general-v1"
    assert chain["agents"]["actor_0"]["stop"] == ["}"] and chain["lora_compute"] == "float32"
    # the test read: the team's trained adapters on 3 test problems, once; a second read and an impossible one are
    # refused in one line, and the refused ones write nothing
    read = json.loads((tmp_path / "test" / "b_marft_jigsaw_s0" / "summary.json").read_text())
    assert read["eval_after"]["split"] == "test" and read["eval_after"]["episodes"] == 3
    assert len((tmp_path / "test" / "b_marft_jigsaw_s0" / "outcomes" / "eval_after.jsonl").read_text().splitlines()) == 3
    run = str(tmp_path / "b_marft_jigsaw_s0")
    for out_dir, extra, says in (
        ("test", [], "exists: the test split is read once"),
        ("again", ["--episodes", "10000000"], "(test_read --episodes N reads N problems)"),
    ):
        refused = subprocess.run(
            [sys.executable, str(BENCHMARKS / "baselines.py"), "test_read", run, "--out", str(tmp_path / out_dir), *extra],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        last = refused.stderr.strip().splitlines()[-1]
        assert refused.returncode == 1 and says in last and "Traceback" not in refused.stderr, refused.stderr[-2000:]
    assert not (tmp_path / "again" / "b_marft_jigsaw_s0").exists()

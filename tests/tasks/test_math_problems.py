"""Problem sources of the MATH envs: the synthetic generator, files in MATH/GSM8K format, spec errors."""

import ast
import json
import operator
import re
import subprocess
import sys
import time
from fractions import Fraction
from math import gcd

import numpy as np
import pytest

from marft_envs.tasks.math.problems import FileProblems, Problem, ProblemSource, load_problems
from marft_envs.tasks.math.synthetic import TEMPLATES, SyntheticMath, arithmetic_key, arithmetic_split, latex_answer, split_of

_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}
STEP = re.compile(r"^([0-9+\-*/]+)=(-?\d+(?:/\d+)?)$")
LATEX_FRACTION = re.compile(r"^(-?)\\frac\{(\d+)\}\{(\d+)\}$")


def evaluate(expr: str) -> Fraction:
    """Exact value of an ASCII arithmetic expression, with the usual precedence."""

    def ev(node):
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return Fraction(node.value)
        raise ValueError(f"not plain arithmetic: {expr}")

    return ev(ast.parse(expr, mode="eval").body)


def gold_value(answer: str) -> Fraction:
    """The value of a synthetic gold answer; fractions must be reduced and in \\frac form."""
    match = LATEX_FRACTION.match(answer)
    if match:
        sign, p, q = match.group(1), int(match.group(2)), int(match.group(3))
        assert q > 1 and gcd(p, q) == 1, f"not reduced: {answer}"
        return Fraction(-p if sign else p, q)
    assert re.fullmatch(r"-?\d+", answer), f"not an integer or \\frac: {answer}"
    return Fraction(int(answer))


def draw(source, seed, n):
    rng = np.random.default_rng(seed)
    return [source.sample(rng) for _ in range(n)]


# ---- synthetic ----------------------------------------------------------------------------------


def test_synthetic_is_deterministic_and_seeds_differ():
    assert draw(SyntheticMath(), 7, 50) == draw(SyntheticMath(), 7, 50)
    assert draw(SyntheticMath(), 7, 50) != draw(SyntheticMath(), 8, 50)


@pytest.mark.parametrize("level", [0, 1, 2, 3, 4])
def test_every_level_produces_its_kind_of_problem(level):
    problems = draw(SyntheticMath(levels=(level,)), level, 200)
    assert {p.level for p in problems} == {level} and {p.source for p in problems} == {"synthetic"}
    n_steps = {len(p.solution.splitlines()) for p in problems}
    values = [gold_value(p.answer) for p in problems]
    if level == 0:  # level 1's shapes with numbers from 2 to 20
        assert n_steps == {1} and all(v >= 0 and v.denominator == 1 for v in values)
        numbers = [int(x) for p in problems for x in re.findall(r"\d+", p.solution.split("=")[0])]
        assert min(numbers) == 2 and max(numbers) == 20
    if level == 1:
        assert n_steps == {1} and all(v >= 0 and v.denominator == 1 for v in values)
    if level == 2:
        assert n_steps == {2} and all(v.denominator == 1 for v in values)
        assert not any(op in p.solution for p in problems for op in "*/")
    if level == 3:
        assert all(v.denominator == 1 for v in values)
        assert all(re.search(r"\d[*/]\d", p.solution) for p in problems)
    if level == 4:
        assert sum(v.denominator > 1 for v in values) > 0.8 * len(values)


@pytest.mark.parametrize("split", ["train", "test"])
def test_solution_steps_evaluate_to_the_answer(split):
    for p in draw(SyntheticMath(split=split), 0, 500):
        lines = p.solution.splitlines()
        assert lines, p
        for line in lines:
            match = STEP.match(line)
            assert match, f"step not 'expr=value': {line!r}"
            assert evaluate(match.group(1)) == Fraction(match.group(2)), line
        assert Fraction(STEP.match(lines[-1]).group(2)) == gold_value(p.answer), p
        assert p.question.isascii() and p.question.endswith("?"), p.question
        assert p.uid.startswith(tuple(t.tid + ":" for t in TEMPLATES))


def test_latex_answer_forms():
    assert latex_answer(Fraction(14, 6)) == "\\frac{7}{3}"
    assert latex_answer(Fraction(-7, 3)) == "-\\frac{7}{3}"
    assert latex_answer(Fraction(6, 3)) == "2"
    assert latex_answer(-5) == "-5"


def test_templates_are_varied_and_all_reachable():
    assert len(TEMPLATES) >= 6 and {t.level for t in TEMPLATES} == {0, 1, 2, 3, 4}
    problems = draw(SyntheticMath(), 3, 2000)
    # level 0 is opt-in: the default mix (and so every existing run's problems) never draws it
    assert {p.uid.split(":")[0] for p in problems} == {t.tid for t in TEMPLATES if t.level != 0}
    small = draw(SyntheticMath(levels=(0,)), 3, 500)
    assert {p.uid.split(":")[0] for p in small} == {t.tid for t in TEMPLATES if t.level == 0}
    assert len({p.question for p in problems[:300]}) >= 200


def split_by_arithmetic(p: Problem) -> str:
    """The arithmetic split of a drawn synthetic problem, read back from its uid's numbers and its answer."""
    return arithmetic_split(arithmetic_key([Fraction(x) for x in p.uid.split(":")[1].split(",")], gold_value(p.answer)))


def test_train_validation_and_test_are_disjoint():
    drawn = {split: draw(SyntheticMath(split=split), 1, 1000) for split in ("train", "validation", "test")}
    for split, problems in drawn.items():
        assert {split_by_arithmetic(p) for p in problems} == {split}
    assert not {p.uid for p in drawn["train"]} & {p.uid for p in drawn["test"] + drawn["validation"]}
    old = {split: draw(SyntheticMath(split=split, split_by="uid"), 1, 1000) for split in ("train", "test")}
    assert {split_of(p.uid) for p in old["train"]} == {"train"} and {split_of(p.uid) for p in old["test"]} == {"test"}


def test_the_arithmetic_key_ignores_wording_and_order():
    assert arithmetic_key([23, 15], 38) == arithmetic_key([15, 23], Fraction(38)) == "15,23=38"
    assert arithmetic_key([Fraction(1, 3), 6], 2) == "1/3,6=2"
    assert {arithmetic_split(f"{k},{k + 1}={2 * k + 1}") for k in range(200)} == {"train", "validation", "test"}


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"split": "dev"}, "synthetic split must be 'train', 'validation' or 'test', got 'dev'"),
        ({"split_by": "hash"}, "synthetic split_by must be 'arithmetic' or 'uid', got 'hash'"),
        ({"split": "validation", "split_by": "uid"}, "synthetic split by uid (the first release's, kept by the -v0 ids) has no validation"),
    ],
)
def test_bad_splits_are_refused_in_one_line(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        SyntheticMath(**kwargs)


def test_heldout_is_deterministic_distinct_and_from_the_test_split():
    source = SyntheticMath()
    heldout = source.heldout(300, seed=5)
    assert heldout == SyntheticMath().heldout(300, seed=5) != source.heldout(300, seed=6)
    assert len({p.uid for p in heldout}) == 300 and {split_by_arithmetic(p) for p in heldout} == {"test"}
    assert {p.level for p in SyntheticMath(levels=(4,)).heldout(200)} == {4}
    validation = SyntheticMath(split="validation").heldout(100, seed=5)
    assert {split_by_arithmetic(p) for p in validation} == {"validation"}
    assert SyntheticMath(split="train").heldout(50, seed=5) == heldout[:50]  # a train source holds out its test split


def test_synthetic_specs():
    assert load_problems("synthetic").levels == (1, 2, 3, 4)
    assert load_problems("synthetic:0").name == "synthetic:0"
    assert len(SyntheticMath(levels=(0,)).heldout(80)) == 80  # 86 distinct test problems exist
    source = load_problems("synthetic:2,1", split="test")
    assert isinstance(source, SyntheticMath) and source.levels == (1, 2) and source.name == "synthetic:1,2"
    assert {split_by_arithmetic(p) for p in draw(source, 0, 50)} == {"test"}
    assert load_problems(source) is source
    # the first release's split, by name or as the -v0 env ids read a "synthetic" spec
    for old in (load_problems("synthetic-v0:1,2", split="test"), load_problems("synthetic:1,2", split="test", split_by="uid")):
        assert old.split_by == "uid" and old.name == "synthetic-v0:1,2"
        assert {split_of(p.uid) for p in draw(old, 0, 50)} == {"test"}
    assert load_problems("synthetic-v0", split_by="arithmetic").split_by == "uid"
    assert load_problems("synthetic", split="validation").split == "validation"


# ---- files --------------------------------------------------------------------------------------

MATH_ANSWERS = ["23", "\\frac{7}{3}", "(-2, 3)", "31", "-5", "2\\sqrt{5}"]


@pytest.mark.parametrize("name", ["math_small.jsonl", "math_small.json", "math_small.parquet"])
def test_math_files_load(fixtures, name):
    source = load_problems(fixtures / name)
    assert isinstance(source, FileProblems) and len(source) == 6 and source.name == name
    assert [p.answer for p in source.problems] == MATH_ANSWERS  # row 4 has only a solution: last box
    assert [p.level for p in source.problems] == [1, 2, 3, 1, 2, None]
    assert source.problems[0].uid == "fixture/arithmetic/1.json" and source.problems[0].source == "math"
    assert "\\boxed{30}" in source.problems[3].solution


def test_gsm8k_file_loads(fixtures):
    source = load_problems(str(fixtures / "gsm8k_small.jsonl"))
    assert [p.answer for p in source.problems] == ["12", "1200", "14", "150", "-3"]
    first = source.problems[0]
    assert first.source == "gsm8k" and first.uid == "gsm8k_small.jsonl:0"
    assert first.solution.endswith("12 rolls left.") and "####" not in first.solution


def test_unusable_rows_are_skipped_with_a_count(tmp_path):
    rows = [
        {"problem": "What is 1 + 1?", "answer": "2", "solution": ""},
        {"problem": "  ", "answer": "3", "solution": ""},
        {"problem": "What is 2 + 2?", "answer": "", "solution": "It is 4."},  # no box: no gold answer
        {"problem": "What is 3 + 3?", "answer": None, "solution": "So $\\boxed{6}$."},
    ]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.warns(UserWarning, match="skipped 2 of 4 rows"):
        source = load_problems(path)
    assert [p.answer for p in source.problems] == ["2", "6"]


def test_from_rows_takes_plain_dicts():
    source = FileProblems.from_rows([{"problem": "p", "answer": 5, "level": 3}], name="rows")
    assert source.problems == (Problem("p", "5", "", level=3, source="math", uid="rows:0"),)


def test_file_sample_and_heldout_are_deterministic(fixtures):
    source = load_problems(fixtures / "math_small.jsonl")
    assert draw(source, 0, 20) == draw(source, 0, 20)
    rng = np.random.default_rng(3)
    expected = [source.problems[i] for i in np.random.default_rng(3).integers(6, size=1)]
    assert [source.sample(rng)] == expected
    assert source.heldout(3, seed=1) == source.heldout(6, seed=1)[:3]
    assert len({p.uid for p in source.heldout(100)}) == 6  # all of them when asking for more


# ---- errors: one line that says what to fix -----------------------------------------------------


def one_line_error(spec, **kwargs) -> str:
    with pytest.raises(ValueError) as err:
        load_problems(spec, **kwargs)
    message = str(err.value)
    assert "\n" not in message and message
    return message


def test_missing_file(tmp_path):
    message = one_line_error(str(tmp_path / "nope.jsonl"))
    assert "no such file" in message and "nope.jsonl" in message and "'synthetic'" in message


def test_bad_columns(fixtures):
    message = one_line_error(fixtures / "bad_columns.jsonl")
    assert "'prompt'" in message and "'target'" in message  # found
    assert "'problem'" in message and "'question'" in message  # expected


@pytest.mark.parametrize(
    "spec, words",
    [
        ("gsm9k", "unknown problem spec"),
        ("synthetic:7", "synthetic:1,2"),
        ("synthetic", "'train', 'validation' or 'test'"),
        ("hub:", "hub:<dataset name>"),
    ],
)
def test_bad_specs(spec, words):
    assert words in one_line_error(spec, split="dev" if spec == "synthetic" else "train")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("stale_config", [False, True])
def test_hub_fails_fast_offline(monkeypatch, stale_config):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    if stale_config:  # as if `datasets` had been imported before the variables were set
        datasets_config = pytest.importorskip("datasets.config")
        hub_constants = pytest.importorskip("huggingface_hub.constants")
        monkeypatch.setattr(datasets_config, "HF_HUB_OFFLINE", False)
        monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", False)
    start = time.perf_counter()
    message = one_line_error("hub:marft-tests/no-such-dataset:main")
    # The limit is the point (an offline Hub lookup that hangs takes 24-48 s), but generous: a loaded
    # machine may take seconds just to import datasets.
    assert time.perf_counter() - start < 20
    assert "marft-tests/no-such-dataset is not in the local cache" in message and "HF_HUB_OFFLINE=1" in message


# ---- import hygiene -----------------------------------------------------------------------------


def test_importing_problem_sources_does_not_import_datasets():
    code = (
        "import sys; import marft_envs.tasks.math.synthetic; import marft_envs.tasks.math.problems as p; "
        "assert p.SyntheticMath is marft_envs.tasks.math.synthetic.SyntheticMath; "
        "assert 'datasets' not in sys.modules, 'datasets was imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_sources_are_problem_sources():
    assert issubclass(SyntheticMath, ProblemSource) and issubclass(FileProblems, ProblemSource)

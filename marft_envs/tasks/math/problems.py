"""Problem sources for the MATH env family.

A MATH-family env draws one ``Problem`` per episode from a ``ProblemSource``: ``sample(rng)`` with the
env's ``self.np_random`` (so episodes are reproducible from the env seed), and ``heldout(n, seed)``
for a fixed evaluation set. ``load_problems(spec)`` builds a source from a short spec:

=====================================  ==================================================================
spec                                   source
=====================================  ==================================================================
``"synthetic"``, ``"synthetic:1,2"``   ``SyntheticMath``: seeded arithmetic word problems at levels 1-4,
                                       unlimited and offline (the default); train/validation/test split
                                       by arithmetic (numbers and answer, whatever the wording)
``"synthetic-v0:1,2"``                 the same problems on the first release's leaky train/test split by
                                       uid (``split_by="uid"``), for rerunning old results
``"path/to/file.jsonl"``               ``FileProblems`` from a local ``.json`` / ``.jsonl`` / ``.parquet``
                                       file in MATH or GSM8K format (detected from the columns)
``"hub:openai/gsm8k:main"``            ``FileProblems`` from ``datasets.load_dataset(name, config, split)``
a ``ProblemSource``                    itself
=====================================  ==================================================================

Formats:

* **MATH**: ``problem``, plus ``answer`` and/or ``solution``. Without an answer, the gold answer is the
  last ``\\boxed{}`` in the solution. ``level`` ("Level 3" or 3) and ``unique_id`` are kept if present.
* **GSM8K**: ``question`` and ``answer``, a worked solution ending in ``#### <number>``. The gold answer
  is that number without thousands separators; the solution is the text before ``####``. An answer
  that is a single line without ``####`` is taken as the bare gold answer.

Splits: ``split="train"``, ``"validation"`` or ``"test"``. The synthetic split is the generator's own
(disjoint by arithmetic); a Hub dataset's is the dataset's (``validation`` where it has one: GSM8K and
MATH have train and test only); a local file is one split, whatever ``split`` says.

Rows with an empty problem or no gold answer are skipped, with a warning that counts them. ``datasets``
is imported only when a file or Hub dataset is loaded: importing this module stays light.
(``Problem`` and ``ProblemSource`` are defined in :mod:`marft_envs.tasks.math.problem`.)
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Iterable, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from marft_envs.tasks.math.problem import Problem, ProblemSource
from marft_envs.tasks.math.synthetic import ALL_LEVELS, LEVELS, SPLIT_BY, SyntheticMath
from marft_envs.validation import MAX_HELDOUT, check_heldout_n

__all__ = ["Problem", "ProblemSource", "SyntheticMath", "FileProblems", "ProblemSpecError", "load_problems"]

FILE_SUFFIXES = (".json", ".jsonl", ".parquet")
_SPEC_HELP = "pass a .json/.jsonl/.parquet file, 'synthetic', or 'hub:<name>'"
_TRUE = {"1", "ON", "YES", "TRUE"}


class ProblemSpecError(ValueError):
    """A problem spec, file or dataset that cannot be used; the message says what to fix."""


class FileProblems(ProblemSource):
    """A fixed list of problems (from a file or a Hub dataset), sampled uniformly."""

    def __init__(self, problems: Sequence[Problem], name: str = "problems"):
        if not problems:
            raise ProblemSpecError(f"{name}: no usable problems (every row lacks a problem or a gold answer)")
        self.problems = tuple(problems)
        self.name = name
        self.levels = tuple(sorted({p.level for p in self.problems if p.level is not None}))
        self._by_level = {lvl: [p for p in self.problems if p.level == lvl] for lvl in self.levels}

    @classmethod
    def from_file(cls, path: str | os.PathLike) -> FileProblems:
        """Read a local ``.json`` / ``.jsonl`` / ``.parquet`` file in MATH or GSM8K format."""
        path = os.fspath(path)
        if not os.path.isfile(path):
            raise ProblemSpecError(f"no such file: {path}; {_SPEC_HELP}")
        builder = "parquet" if path.endswith(".parquet") else "json"
        datasets = _import_datasets()
        try:
            ds = datasets.load_dataset(builder, data_files=path, split="train")
        except Exception as err:  # datasets raises many types; the user needs one line
            raise ProblemSpecError(f"could not read {path} as {builder}: {_one_line(err)}") from None
        return cls.from_rows(ds, name=os.path.basename(path))

    @classmethod
    def from_hub(cls, name: str, config: str | None = None, split: str = "train") -> FileProblems:
        """Load a Hub dataset with ``datasets.load_dataset(name, config, split=split)``."""
        datasets = _import_datasets()
        offline = _env_offline()
        try:
            with _honour_offline_env(offline):
                ds = datasets.load_dataset(name, config, split=split)
        except Exception as err:
            if offline and isinstance(err, (ConnectionError, FileNotFoundError)):
                raise ProblemSpecError(
                    f"dataset {name} is not in the local cache and HF_HUB_OFFLINE=1 / "
                    "HF_DATASETS_OFFLINE=1 is set; unset them to download it, or pass a local "
                    ".json/.jsonl/.parquet file or 'synthetic'"
                ) from None
            where = f"{name}" + (f" (config {config})" if config else "") + f", split {split}"
            raise ProblemSpecError(f"could not load Hub dataset {where}: {_one_line(err)}") from None
        return cls.from_rows(ds, name=name if config is None else f"{name}:{config}")

    @classmethod
    def from_rows(cls, rows: Any, name: str) -> FileProblems:
        """Parse a ``datasets.Dataset`` (or a list of dicts) in MATH or GSM8K format."""
        columns = list(rows.column_names) if hasattr(rows, "column_names") else _columns_of(rows)
        fmt = detect_format(columns, name)
        if hasattr(rows, "select_columns"):  # arrow -> python for the columns we read only
            rows = rows.select_columns([c for c in _USED_COLUMNS if c in columns]).to_list()
        parse = parse_math_row if fmt == "math" else parse_gsm8k_row
        problems = [parse(row, f"{name}:{i}") for i, row in enumerate(rows)]
        kept = [p for p in problems if p is not None]
        if len(kept) < len(problems):
            warnings.warn(
                f"{name}: skipped {len(problems) - len(kept)} of {len(problems)} rows with an empty problem or no gold answer", stacklevel=3
            )
        return cls(kept, name=name)

    def __len__(self) -> int:
        return len(self.problems)

    def __repr__(self) -> str:
        return f"FileProblems({self.name!r}, {len(self)} problems)"

    def sample(self, rng: np.random.Generator) -> Problem:
        return self.problems[int(rng.integers(len(self.problems)))]

    def sample_at(self, rng: np.random.Generator, level: int) -> Problem:
        """One problem of ``level`` (the file's ``level`` column; rows without one are never drawn here)."""
        if level not in self._by_level:
            raise ValueError(f"{self.name} has levels {list(self.levels)}, not {level!r}")
        pool = self._by_level[level]
        return pool[int(rng.integers(len(pool)))]

    @property
    def max_heldout(self) -> int:
        """``MAX_HELDOUT``, or the number of problems if larger (a larger ``n`` than the file holds gives all of it)."""
        return max(len(self.problems), MAX_HELDOUT)

    def heldout(self, n: int, seed: int = 0) -> list[Problem]:
        n = check_heldout_n(n, self.max_heldout, f"{self.name} heldout")
        order = np.random.default_rng(seed).permutation(len(self.problems))[:n]
        return [self.problems[i] for i in order]


# ---- formats ------------------------------------------------------------------------------------

_USED_COLUMNS = ("problem", "question", "answer", "solution", "level", "unique_id")


def detect_format(columns: Iterable[str], name: str = "data") -> str:
    """``"math"`` or ``"gsm8k"`` from the column names, else a ProblemSpecError naming both."""
    cols = set(columns)
    if "problem" in cols and cols & {"answer", "solution"}:
        return "math"
    if {"question", "answer"} <= cols:
        return "gsm8k"
    raise ProblemSpecError(
        f"{name} has columns {sorted(cols)}; expected MATH columns ('problem' with 'answer' and/or "
        "'solution') or GSM8K columns ('question', 'answer')"
    )


def parse_math_row(row: dict, uid: str) -> Problem | None:
    """A MATH row as a Problem, or None without a problem or a gold answer."""
    question, answer = _text(row.get("problem")), _text(row.get("answer"))
    solution = _text(row.get("solution"))
    if not answer and ("\\boxed" in solution or "\\fbox" in solution):
        # Only a box counts: the grader's fallbacks (the last number, ...) would invent a gold answer.
        from marft_envs.rewards.math import extract_answer

        answer = _text(extract_answer(solution))
    if not question or not answer:
        return None
    return Problem(question, answer, solution, level=_level(row.get("level")), source="math", uid=_text(row.get("unique_id")) or uid)


def parse_gsm8k_row(row: dict, uid: str) -> Problem | None:
    """A GSM8K row as a Problem, or None without a question or a gold answer."""
    question, raw = _text(row.get("question")), _text(row.get("answer"))
    if "####" in raw:
        solution, _, answer = raw.rpartition("####")
        solution, answer = solution.strip(), gsm8k_number(answer)
    elif "\n" not in raw:  # a bare final answer, as in question/answer datasets
        solution, answer = "", raw
    else:
        return None
    if not question or not answer:
        return None
    return Problem(question, answer, solution, source="gsm8k", uid=uid)


def gsm8k_number(text: str) -> str:
    """The final-answer text of GSM8K without thousands separators: ``" 1,200"`` -> ``"1200"``."""
    return re.sub(r"(?<=\d),(?=\d)", "", text.strip())


def _text(value: Any) -> str:
    return "" if value is None else str(value).strip()


def _level(value: Any) -> int | None:
    """``3`` or ``"Level 3"`` -> 3; anything else (``"Level ?"``, None) -> None."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value)
    match = re.fullmatch(r"(?:level\s*)?(\d+)", _text(value), flags=re.IGNORECASE)
    return int(match.group(1)) if match else None


def _columns_of(rows: Sequence[dict]) -> list[str]:
    return list(dict.fromkeys(k for row in rows for k in row))


# ---- specs --------------------------------------------------------------------------------------


def load_problems(spec: str | os.PathLike | ProblemSource, *, split: str = "train", split_by: str = "arithmetic") -> ProblemSource:
    """A ProblemSource from a spec: ``"synthetic[:levels]"``, ``"synthetic-v0[:levels]"``, a local file, ``"hub:<name>[:<config>]"``.

    ``split`` picks the synthetic split (``"train"``/``"validation"``/``"test"``) or the Hub split; a local
    file is one split. ``split_by`` is what a ``"synthetic"`` spec's split hashes (``"arithmetic"``, or
    ``"uid"``: the MATH family's ``-v0`` env ids); ``"synthetic-v0"`` always splits by uid. Raises
    ProblemSpecError (a ValueError) with one line saying what to fix.
    """
    if isinstance(spec, ProblemSource):
        return spec
    if isinstance(spec, os.PathLike):
        spec = os.fspath(spec)
    if not isinstance(spec, str):
        raise ProblemSpecError(f"problem spec must be a string or a ProblemSource, not {type(spec).__name__}; " + _SPEC_HELP)
    text = spec.strip()
    kind, _, rest = text.partition(":")
    if kind in ("synthetic", "synthetic-v0"):
        if split_by not in SPLIT_BY:
            raise ProblemSpecError(f"split_by must be one of {list(SPLIT_BY)}, got {split_by!r}")
        try:
            levels = tuple(int(x) for x in rest.split(",")) if rest else LEVELS
            return SyntheticMath(levels, split=split, split_by="uid" if kind == "synthetic-v0" else split_by)
        except ValueError as err:
            raise ProblemSpecError(
                f"bad spec {spec!r}: {_one_line(err)}; use e.g. 'synthetic:1,2' with levels from {ALL_LEVELS} "
                "and split 'train', 'validation' or 'test'"
            ) from None
    if kind == "hub":
        name, _, config = rest.strip().partition(":")
        if not name:
            raise ProblemSpecError(f"bad spec {spec!r}: use 'hub:<dataset name>[:<config>]', e.g. 'hub:openai/gsm8k:main'")
        return FileProblems.from_hub(name, config or None, split=split)
    if os.path.isdir(text):
        raise ProblemSpecError(f"{text} is a directory; {_SPEC_HELP}")
    if os.path.isfile(text) and not text.endswith(FILE_SUFFIXES):
        raise ProblemSpecError(f"unsupported file type: {text}; {_SPEC_HELP}")
    if text.endswith(FILE_SUFFIXES) or os.sep in text or os.path.exists(text):
        return FileProblems.from_file(text)
    raise ProblemSpecError(f"unknown problem spec {spec!r}; {_SPEC_HELP}, e.g. 'synthetic:1,2' or 'hub:openai/gsm8k:main'")


# ---- datasets plumbing --------------------------------------------------------------------------


def _import_datasets():
    try:
        import datasets
    except ImportError:
        raise ProblemSpecError("reading problem files needs the `datasets` package: pip install datasets") from None
    return datasets


def _env_offline() -> bool:
    return any(os.environ.get(k, "").upper() in _TRUE for k in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


@contextmanager
def _honour_offline_env(offline: bool):
    """Apply offline env vars set after ``datasets`` was imported.

    ``datasets`` and ``huggingface_hub`` read them once, at import; without this, setting them later
    (a notebook, a test's monkeypatch) still lets the Hub call retry the network for ~25 s.
    """
    if not offline:
        yield
        return
    import datasets.config
    import huggingface_hub.constants as hub

    saved = (datasets.config.HF_HUB_OFFLINE, datasets.config.HF_DATASETS_OFFLINE, hub.HF_HUB_OFFLINE)
    datasets.config.HF_HUB_OFFLINE = datasets.config.HF_DATASETS_OFFLINE = hub.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        datasets.config.HF_HUB_OFFLINE, datasets.config.HF_DATASETS_OFFLINE, hub.HF_HUB_OFFLINE = saved


def _one_line(err: BaseException | str) -> str:
    """An exception's message on one line, trimmed to a readable length."""
    text = " ".join(str(err).split()) or type(err).__name__
    return text if len(text) <= 300 else text[:297] + "..."

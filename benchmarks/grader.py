r"""Our MATH grader (`marft_envs.rewards.math.answers_match`) against math-verify, side by side.

    .venv/bin/python benchmarks/grader.py

On the hand-labelled pairs in `benchmarks/data/grader_pairs.jsonl` it reports, for both graders:
agreement with the labels (overall, per category, and the disagreements), and throughput in pairs/s.
It also times our grader on pathological inputs (worst latency over several calls per input).
Results are printed and written to `benchmarks/results/grader.json`.

How each grader is called, and what the throughput numbers mean:

- ours: `answers_match(pred, gold)`. "uncached" clears its LRU caches before every pair (nothing
  is reused, not even a gold seen before); "cold" clears them once, then makes one pass (golds that
  repeat are reused, as in training); "warm" is a second pass over the same pairs.
- math-verify 0.9.0: `verify(parse(wrap(gold)), parse(wrap(pred)))` with its default settings
  (LaTeX + plain-expression extraction, 5 s timeouts, which it enforces with `signal.alarm`: it runs
  on the main thread here). Each answer is wrapped so that math-verify reads it as LaTeX; we try
  `\boxed{...}` and `$...$` and headline the wrapping that agrees more with the labels. "first pass"
  and "second pass" are two passes over the pairs (its own internal caches, if any, stay warm).
  The goal compares our "uncached" number with its first pass.
"""

from __future__ import annotations

import json
import platform
import time
from collections import Counter
from pathlib import Path

import math_verify

from marft_envs.rewards.math import answers_match, clear_caches, extract_answer, grade

ROOT = Path(__file__).resolve().parent
PAIRS = ROOT / "data" / "grader_pairs.jsonl"
RESULTS = ROOT / "results" / "grader.json"

# Categories whose labels follow a documented convention rather than bare mathematics
# (`52_8` != `52` although 52_8 is forty-two; `50\%` == `50`); reported apart for fairness.
CONVENTION_CATEGORIES = ("base_subscript", "percent")

WRAPPINGS = {"boxed": lambda s: f"\\boxed{{{s}}}", "dollars": lambda s: f"${s}$"}

PATHOLOGICAL = {
    "power tower 2^2^2^2^2^2": r"2^{2^{2^{2^{2^{2}}}}}",
    "9^9^9^9": "9^9^9^9",
    "10^{100000}": r"10^{100000}",
    "(2^{1000})^{1000}": r"(2^{1000})^{1000}",
    "(10^{1000})!": r"(10^{1000})!",
    "binom(100000, 50000)": r"\binom{100000}{50000}",
    "e^e^e^e^10": r"e^{e^{e^{e^{10}}}}",
    "5000 nested parens": "(" * 5000 + "1" + ")" * 5000,
    "3000 nested \\frac": r"\frac{" * 3000 + "1" + "}{2}" * 3000,
    "400 nested \\sqrt": r"\sqrt{" * 400 + "2" + "}" * 400,
    "100k digits": "1" * 100_000,
    "100k chars of x+x+...": "x+" * 50_000,
    "999-digit integer": "9" * 999,
    "huge ** huge": "9" * 300 + "^" + "9" * 300,
    "NUL and control chars": "\x00\x01\x02\x1b" * 1000,
    "answer is 5, 40k spaces, 6": "The answer is 5" + " " * 40_000 + "6",
    "answer is {. a. a ...": "The answer is {" + ". a" * 200_000,
    "1,234,567,...,12 (50k groups)": "1,234" + ",567" * 50_000 + ",12",
    "50k unbalanced {": "{" * 50_000,
    "50k } then 50k {": "}" * 50_000 + "{" * 50_000,
    "20k unclosed \\boxed{": r"\boxed{" * 20_000,
    "900 minus signs": "-" * 900 + "5",
    "3000-element list": ",".join(["1"] * 3000),
    "2000-column matrix": r"\begin{pmatrix}" + "1&" * 2000 + r"1\end{pmatrix}",
    "500 \\pm": r"\pm" * 500 + "1",
    "30k ####": "####" * 30_000,
    "10k 'answer is'": "answer is " * 10_000,
    "'answer' + 100k spaces": "answer" + " " * 100_000,
    "repeating decimal, 5000-digit period": r"0.\overline{" + "3" * 5000 + "}",
}


def main() -> None:
    rows = [json.loads(line) for line in PAIRS.read_text().splitlines() if line.strip()]
    pairs = [(r["pred"], r["gold"]) for r in rows]
    labels = [r["label"] for r in rows]
    categories = [r["category"] for r in rows]

    ours, ours_speed = _run_ours(pairs)
    theirs, their_speed = {}, {}
    for name, wrap in WRAPPINGS.items():
        theirs[name], their_speed[name] = _run_math_verify(pairs, wrap)
    best = max(theirs, key=lambda name: _agreement(theirs[name], labels))
    plain = [c not in CONVENTION_CATEGORIES for c in categories]
    worst_latency, latencies = _pathological()

    report = {
        "pairs": len(rows),
        "labels_true": sum(labels),
        "machine": f"{platform.python_implementation()} {platform.python_version()}, {platform.machine()}",
        "ours": {
            "agreement_pct": _agreement(ours, labels),
            "agreement_pct_without_conventions": _agreement(ours, labels, plain),
            "per_category_pct": _per_category(ours, labels, categories),
            "pairs_per_s": ours_speed,
            "disagreements": _disagreements(ours, rows),
        },
        "math_verify": {
            "version": getattr(math_verify, "__version__", "0.9.0"),
            "headline_wrapping": best,
            **{
                name: {
                    "agreement_pct": _agreement(theirs[name], labels),
                    "agreement_pct_without_conventions": _agreement(theirs[name], labels, plain),
                    "per_category_pct": _per_category(theirs[name], labels, categories),
                    "pairs_per_s": their_speed[name],
                    "disagreements": _disagreements(theirs[name], rows),
                }
                for name in WRAPPINGS
            },
        },
        "throughput_ratio_uncached_vs_math_verify_first_pass": ours_speed["uncached"] / their_speed[best]["first_pass"],
        "pathological_worst_latency_s": worst_latency,
        "pathological_latency_s": latencies,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2))
    _print(report, categories)


def _run_ours(pairs):
    results = []
    start = time.perf_counter()
    for pred, gold in pairs:
        clear_caches()
        results.append(answers_match(pred, gold))
    uncached = len(pairs) / (time.perf_counter() - start)
    clear_caches()
    speed = {"uncached": uncached}
    for name in ("cold", "warm"):
        start = time.perf_counter()
        again = [answers_match(pred, gold) for pred, gold in pairs]
        speed[name] = len(pairs) / (time.perf_counter() - start)
        assert again == results, "cached and uncached results differ"
    return results, speed


def _run_math_verify(pairs, wrap):
    def check(pred, gold):
        try:
            return bool(math_verify.verify(math_verify.parse(wrap(gold)), math_verify.parse(wrap(pred))))
        except Exception:  # count a crash as "not equal", as a reward function would
            return False

    speed, results = {}, None
    for name in ("first_pass", "second_pass"):
        start = time.perf_counter()
        results = [check(pred, gold) for pred, gold in pairs]
        speed[name] = len(pairs) / (time.perf_counter() - start)
    return results, speed


def _pathological(repeats: int = 3):
    latencies = {}
    for name, text in PATHOLOGICAL.items():
        calls = [
            lambda: answers_match(text, text),
            lambda: answers_match(text, "1"),
            lambda: extract_answer(text),
            lambda: grade(text, "1"),
            lambda: grade(f"\\boxed{{{text}}}", text),
        ]
        worst = 0.0
        for _ in range(repeats):
            clear_caches()
            for call in calls:
                start = time.perf_counter()
                call()
                worst = max(worst, time.perf_counter() - start)
        latencies[name] = worst
    return max(latencies.values()), latencies


def _agreement(results, labels, keep=None) -> float:
    keep = keep or [True] * len(labels)
    kept = [(r, y) for r, y, k in zip(results, labels, keep) if k]
    return 100.0 * sum(r == y for r, y in kept) / len(kept)


def _per_category(results, labels, categories):
    total, right = Counter(categories), Counter(c for r, y, c in zip(results, labels, categories) if r == y)
    return {c: round(100.0 * right[c] / total[c], 1) for c in total}


def _disagreements(results, rows):
    return [
        {"category": r["category"], "pred": r["pred"], "gold": r["gold"], "label": r["label"]}
        for r, result in zip(rows, results)
        if result != r["label"]
    ]


def _print(report, categories) -> None:
    ours, mv = report["ours"], report["math_verify"]
    best = mv[mv["headline_wrapping"]]
    print(f"{report['pairs']} hand-labelled pairs ({report['labels_true']} equivalent), {report['machine']}\n")
    print(f"{'grader':38} {'agree %':>8} {'w/o conv.':>9} {'pairs/s':>26}")
    print(
        f"{'ours (answers_match)':38} {ours['agreement_pct']:8.1f} {ours['agreement_pct_without_conventions']:9.1f} "
        f"{ours['pairs_per_s']['uncached']:9.0f} uncached / {ours['pairs_per_s']['cold']:.0f} cold / "
        f"{ours['pairs_per_s']['warm']:.0f} warm"
    )
    for name in WRAPPINGS:
        m = mv[name]
        print(
            f"{'math-verify, ' + name + ' wrapping':38} {m['agreement_pct']:8.1f} "
            f"{m['agreement_pct_without_conventions']:9.1f} "
            f"{m['pairs_per_s']['first_pass']:9.0f} first pass / {m['pairs_per_s']['second_pass']:.0f} second pass"
        )
    print(f"('w/o conv.': without the {', '.join(CONVENTION_CATEGORIES)} categories, whose labels follow a documented convention)")
    print(
        f"\nthroughput ratio, ours uncached / math-verify ({mv['headline_wrapping']}) first pass: "
        f"{report['throughput_ratio_uncached_vs_math_verify_first_pass']:.1f}x"
    )
    print(f"worst latency of ours on {len(PATHOLOGICAL)} pathological inputs: {1000 * report['pathological_worst_latency_s']:.1f} ms")

    print(f"\n{'category':20} {'n':>4} {'ours %':>7} {'m-v %':>7}")
    for c, n in Counter(categories).items():
        print(f"{c:20} {n:4} {ours['per_category_pct'][c]:7.1f} {best['per_category_pct'][c]:7.1f}")
    for title, items in (("ours", ours["disagreements"]), (f"math-verify ({mv['headline_wrapping']})", best["disagreements"])):
        print(f"\ndisagreements, {title}: {len(items)}  (label: pred | gold)")
        for d in items:
            print(f"  [{d['category']}] {'T' if d['label'] else 'F'}: {d['pred']}  |  {d['gold']}")
    print(f"\nwritten to {RESULTS.relative_to(ROOT.parent)}")


if __name__ == "__main__":
    main()

"""Issue-2 benchmarks in one run: the grader against math-verify, then env throughput.

    .venv/bin/python benchmarks/envs.py

Runs ``benchmarks/grader.py`` (agreement with the hand-labelled pairs, throughput side by side with
math-verify, worst latency on pathological inputs) and ``benchmarks/env_throughput.py`` (rounds
per second with scripted policies) back to back; each writes its JSON under ``benchmarks/results/``.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import env_throughput  # noqa: E402
import grader  # noqa: E402

if __name__ == "__main__":
    grader.main()
    print()
    sys.argv = sys.argv[:1]
    env_throughput.main()

"""The allocator setting: glibc's mmap threshold held fixed, so freed big blocks leave the process."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from marft_agents.training import allocator

glibc = pytest.mark.skipif(allocator._libc() is None, reason="the C library is not glibc")

# A fresh process: free one 8 MiB block (under glibc's dynamic threshold this raises it to 8 MiB),
# then allocate 64 blocks of 2 MiB, each followed by a small block that stays alive (so the heap's
# top cannot be trimmed), and free the big ones. RSS in MiB before, at the peak and after.
PROBE = """
import json, os, sys
from marft_agents.training import allocator
if sys.argv[1] == "hold":
    assert allocator.hold_mmap_threshold()
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
del_me = bytearray(8 * 2**20); del del_me
before = rss()
big, pins = [], []
for _ in range(64):
    big.append(bytearray(2 * 2**20))
    pins.append(bytearray(64 * 2**10))
peak = rss()
del big
print(json.dumps({"before": before, "peak": peak, "after": rss()}))
"""


def probe(mode: str, monkeypatch) -> dict:
    monkeypatch.delenv(allocator.ENV_VAR, raising=False)
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True, timeout=120)
    return json.loads(out.stdout)


@glibc
def test_a_held_threshold_returns_freed_big_blocks_to_the_system(monkeypatch):
    held, dynamic = probe("hold", monkeypatch), probe("dynamic", monkeypatch)
    for r in (held, dynamic):
        assert r["peak"] - r["before"] > 100  # the 128 MiB of big blocks were touched
    # Held: the 2 MiB blocks were mmapped and left with free(); glibc's default kept them in the heap.
    assert held["after"] - held["before"] < 32
    assert dynamic["after"] - dynamic["before"] > 96


@glibc
def test_holding_reports_that_it_set_the_threshold(monkeypatch):
    monkeypatch.delenv(allocator.ENV_VAR, raising=False)
    assert allocator.hold_mmap_threshold() is True


def test_the_users_environment_setting_wins(monkeypatch):
    monkeypatch.setenv(allocator.ENV_VAR, "65536")
    assert allocator.hold_mmap_threshold() is False


def test_another_c_library_is_left_alone(monkeypatch):
    monkeypatch.delenv(allocator.ENV_VAR, raising=False)
    monkeypatch.setattr(allocator, "_libc", lambda: None)
    assert allocator.hold_mmap_threshold() is False


@pytest.mark.parametrize("threshold", [0, -1])
def test_a_threshold_that_is_not_positive_is_refused(threshold):
    with pytest.raises(ValueError, match="positive number of bytes"):
        allocator.hold_mmap_threshold(threshold)

"""The judge's parts, on the host: the plain-data codec, the report the host accepts, free names."""

import ast
import json

import pytest

from marft_envs.tasks.code.harness import read_report
from marft_envs.tasks.code.judge import free_names
from marft_envs.tasks.code.judge_wire import WireError, decode, encode


class Handles:
    def __init__(self):
        self.objects = []

    def __call__(self, value):
        self.objects.append(value)
        return {"t": "ref", "v": len(self.objects) - 1, "type": type(value).__name__}


class Int(int):
    pass


@pytest.mark.parametrize(
    "value, wire",
    [
        (3, 3),
        ("a", "a"),
        (None, None),
        (True, True),
        (1.5, 1.5),
        ([1, "x"], {"t": "list", "v": [1, "x"]}),
        ((1, (2,)), {"t": "tuple", "v": [1, {"t": "tuple", "v": [2]}]}),
        ({1: "a"}, {"t": "dict", "v": [[1, "a"]]}),
        (frozenset([2]), {"t": "frozenset", "v": [2]}),
        (b"\x00\xff", {"t": "bytes", "v": "AP8="}),
        (1 + 2j, {"t": "complex", "v": [1.0, 2.0]}),
    ],
)
def test_plain_data_round_trips_exactly(value, wire):
    assert encode(value) == wire
    back = decode(json.loads(json.dumps(wire)))
    assert back == value and type(back) is type(value)


def test_anything_else_becomes_a_handle_never_a_value():
    handles = Handles()
    assert encode(Int(5), handles) == {"t": "ref", "v": 0, "type": "Int"}  # an int subclass is not an int
    assert encode([object()], handles)["v"][0]["t"] == "ref"
    deep = []
    for _ in range(200):
        deep = [deep]
    assert encode(deep, handles)["t"] == "list"  # the part past MAX_DEPTH stays behind as a handle
    assert encode({Int(1): 2}, handles)["t"] == "ref"  # a key that is a handle: the whole dict stays in P
    with pytest.raises(TypeError, match="cannot be passed"):
        encode(object())  # the judge's side has no handles to give


@pytest.mark.parametrize(
    "wire",
    [
        {"t": "eval", "v": "1"},
        {"t": "list"},
        {"t": "dict", "v": [[1]]},
        {"t": "set", "v": [{"t": "list", "v": []}]},
        {"t": "complex", "v": ["1", 2]},
        {"t": "ref", "v": 0},
        [1, 2],
        {"x": 1},
        {"t": "bytes", "v": "*"},
    ],
    ids=str,
)
def test_decode_refuses_every_other_shape(wire):
    with pytest.raises((WireError, ValueError)):
        decode(wire)  # no handle maker: a ref is refused too


NONCE = "ab" * 16


def report(results, status="ok"):
    return NONCE + json.dumps({"status": status, "results": results})


@pytest.mark.parametrize(
    "stdout, n, ok",
    [
        (report([["pass", ""], ["fail", "AssertionError"]]), 2, True),
        (report([["pass", ""]] * 3), 2, False),  # more results than tests asked for
        (report([["pass", ""]]), 2, False),  # fewer
        (report([["pass", ""], ["pass", ""]]) + "\n" + report([["pass", ""], ["pass", ""]]), 2, False),  # two reports
        ("noise\n" + report([["pass", ""], ["pass", ""]]), 2, False),
        (report([["pass", ""], ["passed", ""]]), 2, False),  # an unknown verdict
        ("cd" * 16 + json.dumps({"status": "ok", "results": [["pass", ""]] * 2}), 2, False),  # another nonce
        (NONCE + json.dumps({"status": "timeout", "reason": "x"}), 2, True),
        (NONCE + json.dumps({"status": "great", "reason": "x"}), 2, False),
        (NONCE + "{", 2, False),
    ],
)
def test_the_host_accepts_exactly_one_report_with_one_result_per_test(stdout, n, ok):
    assert (read_report(stdout, NONCE, n) is not None) == ok


@pytest.mark.parametrize(
    "test, names",
    [
        ("assert f(1) == 2", ["f"]),
        ("s = Stack()\ns.push(1)\nassert s.pop() == 1", ["Stack"]),
        ("import math\nassert math.isclose(poly(xs, x), 0)", ["poly", "x", "xs"]),
        ("try:\n    g(-1)\nexcept ValueError as e:\n    pass", ["ValueError", "g"]),
        ("assert all(h(i) for i in range(3))", ["all", "h", "range"]),
    ],
)
def test_free_names_are_what_a_test_reads_and_never_binds(test, names):
    assert free_names(ast.parse(test)) == names

"""Run curves: the trailing mean against hand-computed numbers, and a PNG from a run folder."""

import json

import pytest

from marft_agents.runs.plots import plot_run, trailing_mean


def test_trailing_mean_by_hand():
    assert trailing_mean([1, 2, 3, 4, 5], 2) == [1.0, 1.5, 2.5, 3.5, 4.5]
    assert trailing_mean([4, 0, 2], 5) == [4.0, 2.0, 2.0]
    assert trailing_mean([], 3) == []


def test_plot_run_writes_a_png_with_intermediate_evaluations(tmp_path):
    rows = [
        {
            "update": u,
            "train/solved": u / 10,
            "train/return": 1.0,
            "critic/value_loss": 0.5,
            "reasoner_0/entropy": 0.1,
            "reasoner_0/approx_kl": 0.0,
            "train/reasoner_0/own_accuracy": 0.3,
            "train/reasoner_0/response_length": 9.0,
        }
        for u in range(10)
    ]
    rows[4]["eval/accuracy"] = 0.5
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "summary.json").write_text(
        json.dumps({"env": "marft/MathChain-v0", "updates": 10, "eval_before": {"accuracy": 0.4}, "eval_after": {"accuracy": 0.6}})
    )
    out = plot_run(tmp_path)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_run_names_a_folder_without_metrics(tmp_path):
    with pytest.raises(FileNotFoundError, match="run folder"):
        plot_run(tmp_path)

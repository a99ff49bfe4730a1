"""TextArena's games as FlexEnvs: the checkers on every id, turn order as the round graph, `marft train` on one."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import pytest

pytestmark = pytest.mark.adapters
pytest.importorskip("textarena")

import pettingzoo  # noqa: E402
from pettingzoo.test import api_test  # noqa: E402

import marft_envs  # noqa: E402
from marft_envs.adapters.textarena import GAME_OVER, GAMES, IGNORED, YOUR_TURN, register_envs  # noqa: E402
from marft_envs.testing import check_env  # noqa: E402

IDS = [f"marft/TextArena-{name}-v0" for name in GAMES]


def test_every_game_is_registered_and_marft_envs_does_not_import_textarena():
    assert register_envs() == IDS and set(IDS) <= set(marft_envs.list_envs("aec"))
    code = (
        "import sys, marft_envs; assert 'textarena' not in sys.modules; "
        "from marft_envs.plugins import load_entry_points; load_entry_points(); "
        "assert 'marft/TextArena-TicTacToe-v0' in marft_envs.list_envs(); assert 'textarena' not in sys.modules"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr  # the entry point registers the ids without importing textarena


@pytest.mark.parametrize("env_id", IDS)
def test_checkers_pass(env_id):
    report = check_env(env_id, seeds=range(3))
    assert report.passed == [
        "pettingzoo.api_test", "pettingzoo.seed_test", "marft.determinism", "marft.reward_structure", "marft.pure_queries",
        "marft.branching",
    ]  # fmt: skip
    api_test(pettingzoo.make("aec", env_id), num_cycles=100)


def play(env, moves):
    """Step the layered view with one move per ready agent; returns the last round's result."""
    result = None
    for move in moves:
        (agent,) = env.ready_agents()
        result = env.step({agent: move})
    return result


def test_turn_order_is_a_chain_and_textarenas_rewards_end_the_game():
    env = marft_envs.make("marft/TextArena-TicTacToe-v0")
    env.reset(seed=0)
    assert env.ready_agents() == ["player_0"] and env.infos["player_1"]["parents"] == ["player_0"]
    assert "You are Player 0 in Tic Tac Toe" in env.observe("player_0")["instructions"]
    assert env.observe("player_0")["text"].endswith(YOUR_TURN) and env.observe("player_1")["text"].endswith(IGNORED)
    play(env, ["[4]"])
    assert "placed their symbol (O) in cell 4" in env.observe("player_1")["text"]  # it sees this round's move
    assert env.observe("player_1")["text"].endswith(YOUR_TURN)
    result = play(env, ["[0]", "[1]", "[3]", "[7]"])  # O takes 4, 1, 7: player 0 wins in round 2
    assert result is None and env.ready_agents() == ["player_1"] and env.observe("player_1")["text"].endswith(GAME_OVER)
    result = play(env, ["anything"])  # player 1's last reply closes the round and is ignored
    assert result.rewards == {"player_0": 1.0, "player_1": -1.0} and env.agents == []
    assert result.infos["player_0"]["reward_components"] == {"own_correct": 1.0, "textarena": 1.0}
    assert result.infos["player_1"]["moved_this_round"] is False


def test_a_retry_after_an_invalid_move_opens_the_next_round():
    env = marft_envs.make("marft/TextArena-TicTacToe-v0", recent=2)
    env.reset(seed=0)
    play(env, ["no move"])  # invalid: TextArena asks player 0 again, so player 1 closes this round
    assert env.ready_agents() == ["player_1"] and env.observe("player_1")["text"].endswith(IGNORED)
    result = play(env, ["[0]"])
    assert result.infos["player_1"]["moved_this_round"] is False and env.round == 1
    assert env.ready_agents() == ["player_0"] and "attempted an invalid move" in env.observe("player_0")["text"]
    assert len(env.observe("player_0")["text"].splitlines()) <= 2 + 1 + 8  # recent=2 messages (a board spans lines)
    play(env, ["[4]", "[0]"])
    assert env.game.state.game_state["board"][1][1] == "O" and env.game.state.game_state["board"][0][0] == "X"


def test_the_process_random_state_is_left_alone_and_envs_interleave_reproducibly():
    before = random.getstate()
    a, b = (marft_envs.make("marft/TextArena-KuhnPoker-v0") for _ in range(2))
    a.reset(seed=3)
    b.reset(seed=4)
    assert random.getstate() == before
    solo = marft_envs.make("marft/TextArena-KuhnPoker-v0")
    solo.reset(seed=3)
    assert solo.observe("player_0") == a.observe("player_0")  # b's reset in between changed nothing for a


def test_bad_options_fail_in_one_line():
    with pytest.raises(ValueError, match="unknown TextArena game 'Chess-v9'"):
        marft_envs.make("marft/TextArena-TicTacToe-v0", game="Chess-v9")
    with pytest.raises(ValueError, match="recent must be"):
        marft_envs.make("marft/TextArena-TicTacToe-v0", recent=0)


def test_marft_train_runs_two_updates_on_a_textarena_game(tmp_path):
    run = tmp_path / "run"
    args = [
        "train",
        "--no-progress",
        "env=marft/TextArena-Nim-v0",
        "algo=ippo",  # a game's players are opponents (general_sum): MARFT's chain would mix their rewards
        f"run_dir={run}",
        "updates=2",
        "episodes_per_update=4",
        "eval_episodes=2",
        "eval_rounds=0",
        "eval_every=0",
        "max_new_tokens=6",
        "ippo.minibatch_size=4",
        "threads=1",
        "env_kwargs.recent=2",
        "env_kwargs.max_rounds=3",
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    out = subprocess.run(
        [sys.executable, "-m", "marft_agents.cli", *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr[-2000:]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["headline"]["metric"] == "mean_return"  # a game reports no "solved": mean return is the headline
    steps = json.loads((run / "samples" / "eval_after.jsonl").read_text().splitlines()[0])["steps"]
    assert steps[0]["agent"] == "player_0" and "Nim" in steps[0]["observation"]["instructions"]

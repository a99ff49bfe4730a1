"""Held-out evaluation's summaries: per-role diagnostics and the before/after table, on hand-made episodes."""

import pytest
import torch

from marft_agents.evaluation import role_diagnostics, summarize
from marft_agents.rollout import AgentStep, Episode
from marft_agents.trainer import summary_table


def _step(agent: str, n_tokens: int, own: bool | None, *, done: bool = False) -> AgentStep:
    info = {} if own is None else {"reward_components": {"own_correct": float(own)}}
    return AgentStep(episode=0, round=0, agent=agent, prompt=[1], response=[5] * n_tokens,
                     token_logps=torch.zeros(n_tokens), text="x", reward=float(done and bool(own)),
                     round_end=done, done=done, info=info)


def _episode(reasoner: tuple[int, bool], actor: tuple[int, bool]) -> Episode:
    steps = [_step("reasoner_0", *reasoner), _step("actor_0", *actor, done=True)]
    return Episode(index=0, steps=steps, solved=actor[1])


# (reasoner tokens, right), (actor tokens, right) per episode
EPISODES = [
    ((10, True), (4, True)),
    ((6, True), (4, False)),
    ((2, False), (4, False)),
    ((2, False), (6, True)),
]


def test_role_diagnostics_by_hand():
    roles = role_diagnostics([_episode(*e) for e in EPISODES])
    assert roles["reasoner_0"]["mean_response_tokens"] == pytest.approx((10 + 6 + 2 + 2) / 4)
    assert roles["actor_0"]["mean_response_tokens"] == pytest.approx((4 + 4 + 4 + 6) / 4)
    assert roles["reasoner_0"]["own_accuracy"] == pytest.approx(0.5)
    assert roles["actor_0"]["own_accuracy"] == pytest.approx(0.5)
    # the actor was right in 1 of the 2 episodes where the reasoner was right, and 1 of the 2 where it was wrong
    assert roles["reasoner_0"]["answer_accuracy_when_right"] == pytest.approx(0.5)
    assert roles["reasoner_0"]["answer_accuracy_when_wrong"] == pytest.approx(0.5)
    assert roles["reasoner_0"]["n_right"] == roles["reasoner_0"]["n_wrong"] == 2


def test_role_diagnostics_without_reward_components_still_reports_lengths():
    episodes = [Episode(0, [_step("a", 3, None, done=True)], solved=False)]
    assert role_diagnostics(episodes) == {"a": {"mean_response_tokens": 3.0}}


def test_summary_table_shows_percentages_and_lengths():
    before = summarize([_episode(*e) for e in EPISODES])
    after = summarize([_episode((12, True), (4, True))] * 4)
    table = summary_table({"eval_before": before, "eval_after": after, "updates": 3, "wall_time_s": 90.0})
    lines = table.splitlines()
    assert lines[1].split()[-2:] == ["50.0%", "100.0%"]
    length_row = next(line for line in lines if line.startswith("reasoner_0 response length"))
    assert length_row.split()[-2:] == ["5.0", "12.0"]
    assert lines[-1].endswith("3 updates in 1.5 min")

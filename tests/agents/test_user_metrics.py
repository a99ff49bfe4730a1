"""What a user sees per agent (issue 50, item 6): the critic's explained variance, the share of responses cut at the
token limit, the agent's own reward rate, and a warning that names the agent to look at.

Every expected number is worked out by hand in the comment next to it.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from marft_agents.algorithms.critic import ValueHead, explained_variance, fit_critic
from marft_agents.rollout.episode import AgentStep, Episode
from marft_agents.runs.report import agent_health, health_table, zero_reward_warning
from marft_agents.settings.agents import AgentSettings
from marft_agents.signal.diagnostics import TokenLimit, agent_to_look_at, cut_at_limit, means, no_signal_warning, signal_metrics
from marft_agents.training.config import TrainConfig
from marft_agents.training.trainer import RewardWatch, _token_limits

END = 2  # the end-of-turn token of these made-up responses

# -- (a) the critic's explained variance -------------------------------------------------------------------


def test_explained_variance_by_hand():
    returns, values = torch.tensor([1.0, 2.0, 3.0, 4.0]), torch.tensor([1.0, 2.0, 2.0, 5.0])
    # returns - values = [0, 0, 1, -1]: mean 0, variance 2/4 = 0.5 ; returns: mean 2.5, variance (2.25+0.25+0.25+2.25)/4 = 1.25
    assert explained_variance(values, returns) == pytest.approx(1 - 0.5 / 1.25)  # 0.6
    # (N, R) with a mask: only the marked entries count (the same four numbers, padding anything)
    masked_returns = torch.tensor([[1.0, 2.0, 9.0], [3.0, 4.0, -9.0]])
    masked_values = torch.tensor([[1.0, 2.0, 100.0], [2.0, 5.0, 7.0]])
    mask = torch.tensor([[True, True, False], [True, True, False]])
    assert explained_variance(masked_values, masked_returns, mask) == pytest.approx(0.6)
    assert explained_variance(returns, returns) == 1.0  # values equal to the returns explain all of them
    assert explained_variance(torch.full((4,), 2.5), returns) == pytest.approx(0.0)  # the mean: nothing explained
    assert explained_variance(-returns, returns) == pytest.approx(-3.0)  # 1 - Var(2r) / Var(r) = 1 - 4: worse than a constant
    # returns that do not vary leave nothing to explain: no number (not nan, not a made-up 0)
    assert explained_variance(torch.tensor([0.0, 1.0, 2.0]), torch.full((3,), 0.7)) is None
    assert explained_variance(torch.zeros(3), torch.zeros(3)) is None
    assert explained_variance(torch.zeros(1), torch.ones(1)) is None  # one entry: no variance


class TwoRanks:
    """Two data-parallel ranks in one process: the first call is the other rank's (its sums kept), the second this
    rank's, summed with them (what ``Ranks.sum``'s all-reduce returns on every rank)."""

    parallel = True

    def __init__(self):
        self.other: torch.Tensor | None = None

    def sum(self, values: torch.Tensor) -> torch.Tensor:
        if self.other is None:
            self.other = values
            return values
        return values + self.other


def test_explained_variance_under_data_parallel_is_that_of_every_ranks_rows():
    returns, values = torch.tensor([1.0, 2.0, 3.0, 4.0]), torch.tensor([1.0, 2.0, 2.0, 5.0])
    ranks = TwoRanks()
    explained_variance(values[2:], returns[2:], ranks=ranks)  # rank 1's rows
    assert explained_variance(values[:2], returns[:2], ranks=ranks) == pytest.approx(0.6)  # rank 0's: the whole batch's


def test_fit_critic_reports_the_explained_variance_of_the_values_before_the_fit():
    def fit(values_old, returns):
        torch.manual_seed(0)
        head = ValueHead(3, hidden=4)
        optimizer = torch.optim.AdamW(head.parameters(), lr=1e-3)
        settings = dict(epochs=2, minibatch_size=2, value_clip=None, max_grad_norm=1.0)
        return fit_critic(head, optimizer, (torch.randn(4, 3),), values_old, returns, np.random.default_rng(0), **settings)

    metrics = fit(torch.tensor([1.0, 2.0, 2.0, 5.0]), torch.tensor([1.0, 2.0, 3.0, 4.0]))
    assert list(metrics) == ["critic/value_loss", "critic/value_mean", "critic/explained_variance"]
    assert metrics["critic/explained_variance"] == pytest.approx(0.6) and metrics["critic/value_mean"] == 2.5
    assert "critic/explained_variance" not in fit(torch.zeros(4), torch.ones(4))  # flat returns: left out


# -- (b), (c) the share of responses cut at the limit, and of positive rewards ---------------------------------


def step(agent: str, response: list[int], reward: float = 0.0, skipped: bool = False) -> AgentStep:
    return AgentStep(0, 0, agent, [], response, torch.zeros(len(response)), "", reward=reward, skipped=skipped)


def test_a_response_is_cut_when_it_reaches_the_limit_without_the_end_token():
    limit = TokenLimit(max_new_tokens=4, end_token=END)
    assert cut_at_limit([5, 6, 7, 8], limit)
    assert not cut_at_limit([5, 6, 7, END], limit)  # ended exactly at the limit, with the end token: finished
    assert not cut_at_limit([5, END], limit) and not cut_at_limit([5, 6, 7], limit)  # shorter: it ended
    assert cut_at_limit([5, 6, 7, END], TokenLimit(4, None))  # the end token unknown: at the limit is cut


def test_per_agent_fractions_by_hand():
    episodes = [
        Episode(0, [step("reasoner_0", [5, 6, 7, 8], 1.0), step("actor_0", [5, END], 0.0)], solved=None),
        Episode(1, [step("reasoner_0", [5, 6, 7, END], -1.0), step("actor_0", [5, 6, 7], 0.5)], solved=None),
        Episode(2, [step("reasoner_0", [5, 6, 7, 9], 0.0), step("actor_0", [], 0.0, skipped=True)], solved=None),
    ]
    metrics = signal_metrics(episodes, group_size=1, limits={"reasoner_0": TokenLimit(4, END)})
    # reasoner_0: cut [5,6,7,8] and [5,6,7,9], not [5,6,7,END] -> 2/3 ; rewards [1, -1, 0]: one positive -> 1/3
    assert metrics["signal/reasoner_0/truncated_frac"] == pytest.approx(2 / 3)
    assert metrics["signal/reasoner_0/rewarded_frac"] == pytest.approx(1 / 3)
    # actor_0: rewards [0, 0.5, 0] -> 1/3 ; no limit given for it: no truncated_frac
    assert metrics["signal/actor_0/rewarded_frac"] == pytest.approx(1 / 3) and "signal/actor_0/truncated_frac" not in metrics
    # its own limit (3 tokens): [5, 6, 7] is cut; the skipped step generated nothing and is not counted -> 1/2
    actor = signal_metrics(episodes, group_size=1, limits={"actor_0": TokenLimit(3, END)})
    assert actor["signal/actor_0/truncated_frac"] == 0.5


def test_each_agents_limit_is_its_own_max_new_tokens_else_the_runs():
    config = TrainConfig(max_new_tokens=6)
    config.agents = {"reasoner_0": AgentSettings(max_new_tokens=4)}
    policy = SimpleNamespace(adapter_of={"reasoner_0": "reasoner_0", "actor_0": "actor_0"}, is_team=False, eos_token_id=END)
    assert _token_limits(config, policy) == {"reasoner_0": TokenLimit(4, END), "actor_0": TokenLimit(6, END)}
    ends = {"reasoner_0": 7, "actor_0": 9}  # a team of models: each agent's end token is its own model's
    team = SimpleNamespace(adapter_of=policy.adapter_of, is_team=True, member=lambda a: SimpleNamespace(eos_token_id=ends[a]))
    assert _token_limits(config, team) == {"reasoner_0": TokenLimit(4, 7), "actor_0": TokenLimit(6, 9)}


# -- (d) the warning names the agent to look at ----------------------------------------------------------------

NARROW_ACTOR = {
    "signal/rewarded_frac": 0.0,
    "signal/zero_spread_frac": 1.0,
    "signal/reasoner_0/rewarded_frac": 0.0,
    "signal/actor_0/rewarded_frac": 0.0,
    "train/reasoner_0/own_accuracy": 0.35,
    "train/actor_0/own_accuracy": 0.0,
    "signal/reasoner_0/truncated_frac": 0.1,
    "signal/actor_0/truncated_frac": 0.87,
}
LIMITS = {"reasoner_0": TokenLimit(256, END), "actor_0": TokenLimit(48, END)}
POINTER = (
    "look at agent actor_0 first (own score (own_correct) 0% while reasoner_0's is 35%; "
    "87% of its responses cut at max_new_tokens=48; raise agents.actor_0.max_new_tokens)"
)


def test_the_agent_to_look_at_is_the_one_scoring_0_while_a_teammate_scores():
    assert agent_to_look_at(NARROW_ACTOR, LIMITS) == POINTER
    line = no_signal_warning(3, NARROW_ACTOR, ["signal.dynamic_sampling=true (...)"], agent_to_look_at(NARROW_ACTOR, LIMITS))
    assert f"; {POINTER}; try, in this order: signal.dynamic_sampling=true" in line and "\n" not in line
    # without the env's own_correct, the own score is the share of positive rewards
    rewards = {"signal/reasoner_0/rewarded_frac": 0.25, "signal/actor_0/rewarded_frac": 0.0, "signal/actor_0/truncated_frac": 0.1}
    assert agent_to_look_at(rewards, LIMITS) == (
        "look at agent actor_0 first (own score (rewarded steps) 0% while reasoner_0's is 25%; "
        "10% of its responses cut at max_new_tokens=48)"
    )


def test_a_mostly_cut_agent_is_named_and_nobody_when_none_stands_out():
    solo = {"signal/solver_0/rewarded_frac": 0.0, "signal/solver_0/truncated_frac": 0.9}
    assert agent_to_look_at(solo, {"solver_0": TokenLimit(16, END)}) == (
        "look at agent solver_0 first (own score (rewarded steps) 0%; 90% of its responses cut at max_new_tokens=16; "
        "raise agents.solver_0.max_new_tokens)"
    )
    both_score = {**NARROW_ACTOR, "train/actor_0/own_accuracy": 0.2, "signal/actor_0/truncated_frac": 0.3}
    assert agent_to_look_at(both_score, LIMITS) is None  # both score, neither mostly cut
    assert agent_to_look_at({"signal/rewarded_frac": 0.0}, {}) is None


def test_the_zero_reward_warning_names_the_agent_from_the_means_of_the_updates_seen():
    steps = [step("reasoner_0", [5, END]), step("actor_0", [5, 6])]
    watch = RewardWatch(0, 2, "embedded", [], LIMITS)
    assert watch.check(0, [Episode(0, steps, solved=False)], {**NARROW_ACTOR, "signal/actor_0/truncated_frac": 0.8}) is None
    warning = watch.check(1, [Episode(1, steps, solved=False)], {**NARROW_ACTOR, "signal/actor_0/truncated_frac": 1.0})
    # the actor's cut share over the two updates: (0.8 + 1.0) / 2 = 90%
    assert "so there is nothing to learn from. Look at agent actor_0 first (own score (own_correct) 0% while" in warning
    assert "90% of its responses cut at max_new_tokens=48" in warning and "Other likely causes: the model cannot" in warning
    assert means([{"a": 1.0}, {"a": 2.0, "b": 4.0}]) == {"a": 1.5, "b": 4.0}
    assert "Likely causes: the model cannot do the task" in zero_reward_warning(2)  # nobody named: as before


# -- the printed table ---------------------------------------------------------------------------------------


def test_the_health_table_shows_each_agents_rewarded_and_cut_shares_and_its_critics_explained_variance():
    metrics = {
        "shared/advantage_mean": 0.0,
        "shared/advantage_std": 1.0,
        "shared/reward": 0.5,
        "signal/reasoner_0/rewarded_frac": 0.5,
        "signal/actor_0/rewarded_frac": 0.25,
        "signal/actor_0/truncated_frac": 0.875,
        "critic/explained_variance": 0.125,  # the critic both agents share
    }
    health = agent_health(metrics, {"reasoner_0": "shared", "actor_0": "shared"})
    assert health["actor_0"] == {
        "advantage_mean": 0.0,
        "advantage_std": 1.0,
        "reward": 0.5,
        "rewarded_frac": 0.25,
        "truncated_frac": 0.875,
        "explained_variance": 0.125,
    }
    # CORY: each agent's own critic (<adapter>/critic/...) comes before a shared one
    own = agent_health({**metrics, "shared/critic/explained_variance": -0.5}, {"actor_0": "shared"})
    assert own["actor_0"]["explained_variance"] == -0.5
    lines = health_table(health, 3)
    assert lines[0] == "agent (update 3)   advantage ± spread   reward   rewarded   own accuracy   copy rate   cut at limit   critic EV"
    assert lines[2].split() == ["actor_0", "+0.000", "±", "1.000", "0.500", "25.0%", "-", "-", "87.5%", "+0.12"]
    assert lines[1].split()[-2:] == ["-", "+0.12"]  # the reasoner: no limit logged, the shared critic

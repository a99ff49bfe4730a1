"""Rewards of every shape (issue 50): per-agent returns and no-signal rule, declared shared rewards, competitive games.

Each learner either trains a zero-sum or general-sum env correctly (each agent's own returns, nothing of one
player backed into another's) or refuses it in one line that names the learners that do.
"""

import warnings

import numpy as np
import pytest
import torch
from agent_helpers import episode
from signal_env import CreditChain

import marft_envs
from marft_agents import algorithms
from marft_agents.algorithms.grpo import grpo_advantages, reward_to_go
from marft_agents.algorithms.ippo_mappo import IPPO, IPPOConfig
from marft_agents.algorithms.prepare import prepare_advantages
from marft_agents.algorithms.returns import agent_returns, undeclared_team_reward, warn_undeclared_team_reward
from marft_agents.models.policy import LaMASPolicy, load_base
from marft_agents.models.sampling import Sampling
from marft_agents.rollout.layered import RolloutEngine
from marft_agents.signal.diagnostics import signal_metrics
from marft_envs import FlexEnv, RoundResult
from marft_envs.outcomes import SHARED_REWARD
from marft_envs.rewards.credit import Credit, assign_credit
from marft_envs.testing import check_env


class _Policy:
    """The two members agent_returns and prepare_advantages read of a policy."""

    def __init__(self, adapter_of):
        self.adapter_of = adapter_of
        self.agents = list(adapter_of)
        self.adapters = list(dict.fromkeys(adapter_of.values()))
        self.device = torch.device("cpu")


def duel_episode(index: int, r0: float) -> object:
    """One NumberDuel-like round: player_0 paid ``r0``, player_1 ``-r0``."""
    return episode(index, [[("player_0", r0), ("player_1", -r0)]])


# -- each agent's returns, by hand ---------------------------------------------------------------------


def test_agent_returns_along_the_chain_and_of_its_own():
    # round 0: reasoner 0, actor 1 (shared 1: the team reward paid to each); round 1: reasoner 0.5, actor 0
    e = episode(0, [[("reasoner_0", 1.0), ("actor_0", 1.0)], [("reasoner_0", 0.5), ("actor_0", 0.0)]])
    for s in e.steps[:2]:
        s.info = {SHARED_REWARD: 1.0}
    policy = _Policy({"reasoner_0": "reasoner_0", "actor_0": "actor_0"})
    # chain: from the agent's first step on, the shared 1 once: 1 + 0.5 = 1.5 for both (the actor's first step ends round 0)
    assert agent_returns(policy, [e], "chain") == {"reasoner_0": [1.5], "actor_0": [1.5]}
    assert agent_returns(policy, [e], "own") == {"reasoner_0": [1.5], "actor_0": [1.0]}
    duel = [duel_episode(0, 1.0), duel_episode(1, -1.0)]
    players = _Policy({"player_0": "player_0", "player_1": "player_1"})
    assert agent_returns(players, duel, "own") == {"player_0": [1.0, -1.0], "player_1": [-1.0, 1.0]}
    with pytest.raises(ValueError, match="view must be one of"):
        agent_returns(players, duel, "team")


def test_the_no_signal_rule_is_per_agent():
    policy = _Policy({"a_0": "a_0", "b_0": "b_0"})
    steps = [s for e in [episode(k, [[("a_0", 1.0), ("b_0", float(k))]]) for k in range(2)] for s in e.steps]
    idx_of = {"a_0": [0, 2], "b_0": [1, 3]}
    advantages = torch.tensor([0.5, -0.5, 1.0, 2.0])
    options = dict(normalize=True, scope="agent", skip_equal_returns=True)
    _, metrics, informative = prepare_advantages(policy, {"a_0": [1.0, 1.0], "b_0": [0.0, 1.0]}, steps, idx_of, advantages, **options)
    assert informative == {"a_0": False, "b_0": True}  # a_0's returns are all equal: it alone takes no step
    assert metrics["a_0/skipped_equal_returns"] == 1.0 and metrics["b_0/skipped_equal_returns"] == 0.0
    assert metrics["policy/skipped_equal_returns"] == 0.5
    _, _, informative = prepare_advantages(
        policy, {"a_0": [1.0, 1.0]}, steps, idx_of, advantages, **{**options, "skip_equal_returns": False}
    )
    assert informative == {"a_0": True, "b_0": True}


# -- a shared reward declared by the library's helpers, counted once -----------------------------------


def test_assign_credit_says_its_shared_part():
    assert assign_credit("team", ["a", "b"], 0.5) == {"a": 0.5, "b": 0.5} and assign_credit("team", ["a", "b"], 0.5).shared == 0.5
    assert assign_credit("last", ["a", "b"], 1.0).shared == 0.0 and isinstance(assign_credit("per_agent", ["a"], 1.0), Credit)


def test_a_round_result_declares_its_shared_reward_in_every_agents_info():
    env = CreditChain()
    env.reset(seed=0)
    env.step({"reasoner_0": "x"})
    result = env.step({"actor_0": "yy"})
    assert result.rewards == {"reasoner_0": 1.0, "actor_0": 1.0} and {i[SHARED_REWARD] for i in result.infos.values()} == {1.0}
    assert "marft.reward_structure" in check_env(CreditChain).passed


def test_a_users_team_env_is_counted_once_by_the_team_return(tiny_model_dir):
    model, tokenizer = load_base(str(tiny_model_dir))
    policy = LaMASPolicy(model, tokenizer, ["reasoner_0", "actor_0"])
    torch.manual_seed(0)
    episodes = RolloutEngine(policy, Sampling(1.0, 6)).collect([CreditChain() for _ in range(8)], range(8))
    for e in episodes:
        paid = e.steps[-1].reward
        assert e.team_return == paid and agent_returns(policy, [e], "chain") == {"reasoner_0": [paid], "actor_0": [paid]}
    assert undeclared_team_reward([s for e in episodes for s in e.steps]) is None


def test_an_undeclared_team_reward_is_found_and_warned_once_per_call():
    e = episode(0, [[("a_0", 1.0), ("b_0", 1.0)]])  # both paid 1, no shared part declared
    assert undeclared_team_reward(e.steps) == 1.0
    with pytest.warns(UserWarning, match="declares no shared part.*assign_credit"):
        assert warn_undeclared_team_reward("marft", e.steps)
    e.steps[0].info = e.steps[1].info = {SHARED_REWARD: 1.0}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not warn_undeclared_team_reward("marft", e.steps)
    assert undeclared_team_reward(episode(0, [[("a_0", 0.0), ("b_0", 0.0)]]).steps) is None  # nothing paid


# -- competitive games: refused where the learner assumes a team, trained where it does not -----------


@pytest.mark.parametrize("algo", ["marft", "marft_token", "mappo", "cory"])
def test_a_learner_that_assumes_one_team_refuses_a_zero_sum_game_in_one_line(algo):
    config_class, learner_class = algorithms.lookup(algo)
    with pytest.raises(ValueError, match=rf"algo={algo} trains one team .*'zero_sum': use algo=ippo") as err:
        learner_class.check_env(config_class(), marft_envs.make("marft/NumberDuel-v0"))
    assert "\n" not in str(err.value)


def test_grpo_refuses_tree_grouping_on_a_zero_sum_game_and_takes_the_others():
    config_class, grpo = algorithms.lookup("grpo")
    duel = marft_envs.make("marft/NumberDuel-v0")
    with pytest.raises(ValueError, match="'zero_sum': use grpo.grouping=problem or agent_round"):
        grpo.check_env(config_class(grouping="tree"), duel)
    grpo.check_env(config_class(), duel)
    algorithms.lookup("ippo")[1].check_env(IPPOConfig(), duel)


def test_grpo_scores_opponents_by_their_own_rewards():
    episodes = [duel_episode(0, 1.0), duel_episode(1, -1.0)]  # one problem, two episodes
    team = grpo_advantages(episodes, group_size=2, grouping="problem", gamma=1.0)
    assert torch.equal(team, torch.zeros(4))  # the team's return is always 0: nothing to learn
    own = grpo_advantages(episodes, group_size=2, grouping="problem", gamma=1.0, own=True)
    # player_0's samples 1, -1: mean 0, std 1 -> +1, -1; player_1's the opposite (steps: p0, p1, p0, p1)
    assert own.tolist() == pytest.approx([1.0, -1.0, -1.0, 1.0], abs=1e-5)
    by_round = grpo_advantages(episodes, group_size=2, grouping="agent_round", gamma=1.0, own=True)
    assert by_round.tolist() == pytest.approx([1.0, -1.0, -1.0, 1.0], abs=1e-5)


def test_grpo_counts_a_shared_team_reward_once():
    e = episode(0, [[("reasoner_0", 1.0), ("actor_0", 1.0)]])
    for s in e.steps:
        s.info = {SHARED_REWARD: 1.0}
    assert reward_to_go(e, 1.0) == [1.0, 1.0]  # not 2: each agent's copy of the team reward
    assert reward_to_go(duel_episode(0, 1.0), 1.0, "player_1") == [-1.0, -1.0]


def test_the_signal_diagnostics_see_a_zero_sum_batch_as_informative():
    metrics = signal_metrics([duel_episode(0, 1.0), duel_episode(1, -1.0)], group_size=1)
    assert metrics["signal/zero_spread_frac"] == 0.0  # the team's return is 0 twice, each player's differs


def test_ippo_trains_a_player_against_a_frozen_copy_on_a_zero_sum_batch(tiny_model_dir):
    model, tokenizer = load_base(str(tiny_model_dir))
    envs = [marft_envs.make("marft/NumberDuel-v0") for _ in range(8)]
    policy = LaMASPolicy(model, tokenizer, envs[0].possible_agents)
    algo = IPPO(policy, IPPOConfig(minibatch_size=4), temperature=1.0, frozen=frozenset({"player_1"}))
    torch.manual_seed(0)
    episodes = RolloutEngine(policy, Sampling(1.0, 6)).collect(envs, range(8))
    for k, e in enumerate(episodes):  # a random tiny model names no number: pay the game's outcomes by hand
        r0 = 1.0 if k % 2 else -1.0
        e.steps[0].reward, e.steps[1].reward = r0, -r0
    assert {e.team_return for e in episodes} == {0.0}  # the team-return rule would skip every update
    before = {a: [p.detach().clone() for p in policy.parameters(a)] for a in policy.adapters}
    metrics = algo.update(episodes, 0, np.random.default_rng(0))
    assert metrics["player_0/skipped_equal_returns"] == 0.0 and "player_0/loss" in metrics
    assert all(not torch.equal(x, y) for x, y in zip(before["player_0"], policy.parameters("player_0")))
    assert all(torch.equal(x, y) for x, y in zip(before["player_1"], policy.parameters("player_1")))


class ClaimsZeroSum(FlexEnv):
    """Declares a zero-sum game but pays both players 1."""

    metadata = {"name": "tests/ClaimsZeroSum-v0", "is_parallelizable": True, "render_modes": ["ansi"]}
    reward_structure = "zero_sum"

    def __init__(self):
        super().__init__(["p_0", "p_1"])

    def reset_task(self, options):
        pass

    def observe_text(self, agent):
        return "Play."

    def end_round(self, actions):
        return RoundResult(rewards=dict.fromkeys(actions, 1.0), terminations=dict.fromkeys(actions, True))


def test_check_env_holds_the_declared_reward_structure():
    with pytest.raises(AssertionError, match="declares reward_structure='zero_sum' but a round paid"):
        check_env(ClaimsZeroSum)
    ClaimsZeroSum.reward_structure = "friendly"
    try:
        with pytest.raises(ValueError, match="reward_structure must be one of"):
            check_env(ClaimsZeroSum)
    finally:
        ClaimsZeroSum.reward_structure = "zero_sum"


# -- the smaller defects ----------------------------------------------------------------------------------


def test_a_shared_adapter_is_standardised_per_role():
    # adapter_mode=shared: one adapter plays both roles; each role's advantages are standardised on their own
    policy = _Policy({"a_0": "shared", "b_0": "shared"})
    steps = [s for e in [episode(k, [[("a_0", 0.0), ("b_0", 0.0)]]) for k in range(2)] for s in e.steps]
    advantages = torch.tensor([1.0, 10.0, 3.0, 14.0])  # a_0: 1, 3; b_0: 10, 14
    out, _, _ = prepare_advantages(
        policy, {"shared": [0.0, 1.0]}, steps, {"shared": [0, 1, 2, 3]}, advantages, normalize=True, scope="agent",
        skip_equal_returns=True,
    )  # fmt: skip
    assert out.tolist() == pytest.approx([-1.0, -1.0, 1.0, 1.0], abs=1e-6)  # jointly, b_0 would be pushed up, a_0 down


def test_token_marft_enters_a_shared_reward_into_the_chain_once():
    from marft_agents.algorithms.marft_token import compute_advantages
    from marft_agents.algorithms.token_ppo import pack

    e = episode(0, [[("reasoner_0", 1.0), ("actor_0", 1.0)]])  # the team reward 1, paid to each
    for s in e.steps:
        s.info, s.response, s.token_logps = {SHARED_REWARD: 1.0}, [5, 6], torch.zeros(2)
    batch = pack(e.steps)
    discounts = dict(gamma=1.0, gamma_agent=1.0, gamma_token=1.0, lam=1.0)
    _, returns = compute_advantages(e.steps, batch, torch.zeros(2, 2), **discounts)
    assert returns.tolist() == [[1.0, 1.0], [1.0, 1.0]]  # once: the reasoner's tokens see 1, not 2
    _, returns = compute_advantages(e.steps, batch, torch.zeros(2, 2), shared_reward="per_agent", **discounts)
    assert returns[0].tolist() == [2.0, 2.0]  # every copy summed along the chain (the ablation)


def test_merge_lora_on_a_bf16_base_needs_the_importance_weights(tiny_model_dir):
    from marft_agents.training.config import ConfigError, TrainConfig
    from marft_agents.training.setup import build_policy

    config = TrainConfig(model=str(tiny_model_dir), dtype="bfloat16")
    config.generation.merge_lora = True
    with pytest.raises(ConfigError, match="merge_lora=true on a bfloat16 base rounds the merged adapter weights: set generation.tis_cap"):
        build_policy(config, ["reasoner_0", "actor_0"])
    config.generation.tis_cap = 2.0
    assert build_policy(config, ["reasoner_0", "actor_0"]).adapters == ["reasoner_0", "actor_0"]


def test_marft_trains_a_users_team_chain_and_counts_its_team_reward_once(tiny_model_dir, tmp_path):
    import json

    from marft_agents.training.config import TrainConfig
    from marft_agents.training.trainer import train

    run_dir = tmp_path / "run"
    config = TrainConfig(
        env="signal_env:CreditChain", model=str(tiny_model_dir), run_dir=str(run_dir), updates=2, episodes_per_update=8,
        eval_episodes=2, max_new_tokens=6, checkpoint_every=0, threads=1, seed=0,
    )  # fmt: skip
    config.algo_args.minibatch_size = 8
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # the shared part is declared: no undeclared-team-reward warning
        train(config, progress=False, quiet=True)
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert all(0.0 <= r["train/return"] <= 1.0 for r in rows)  # the team is paid 1 at most: counted once, not 2
    assert any(0.0 < r["train/return"] < 1.0 for r in rows) and any(r["policy/skipped_equal_returns"] == 0.0 for r in rows)

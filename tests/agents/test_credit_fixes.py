"""The multi-agent credit fixes, each against numbers computed by hand (docs/algorithms/marft.md, "Credit").

D1: a shared round reward enters the team's return and the chain once, not once per agent.
D2: advantages are standardised per agent, never across agents.
D3: an update whose returns are all equal takes no policy step (the critic still fits).
The action-level PPO loss, written once (``action_ppo.py``), on hand-made numbers.
"""

import numpy as np
import pytest
import torch
from agent_helpers import episode, plant_rewards

import marft_envs
from marft_agents.algorithms import action_ppo
from marft_agents.algorithms.action_ppo import action_ppo_loss
from marft_agents.algorithms.advantages import normalize, normalize_per_agent, returns_differ
from marft_agents.algorithms.base import flatten
from marft_agents.algorithms.marft import MARFT, MARFTConfig, compute_advantages
from marft_agents.models.policy import LaMASPolicy, load_base
from marft_agents.models.sampling import Sampling
from marft_agents.rollout.evaluation import summarize
from marft_agents.rollout.layered import RolloutEngine
from marft_envs.outcomes import SHARED_REWARD
from marft_envs.rewards.credit import shared_part


def chain_episode(rewards: tuple[float, float], shared: float) -> list:
    """One 2-agent round (reasoner_0 -> actor_0) with the given rewards and shared part."""
    e = episode(0, [[("reasoner_0", rewards[0]), ("actor_0", rewards[1])]])
    for s in e.steps:
        s.info = {SHARED_REWARD: shared}
    return e


# -- D1: a shared reward once ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "mode, team, expected", [("team", 1.0, 1.0), ("team", 0.5, 0.5), ("last", 1.0, 0.0), ("per_agent", 1.0, 0.0), ("team", 0.0, 0.0)]
)
def test_shared_part_is_the_team_reward_under_team_credit_only(mode, team, expected):
    assert shared_part(mode, team) == expected


def test_shared_part_refuses_an_unknown_mode():
    with pytest.raises(ValueError, match="unknown credit mode 'bogus'"):
        shared_part("bogus", 1.0)


@pytest.mark.parametrize(
    "rewards, shared, chain, team_return",
    [
        ((1.0, 1.0), 1.0, [0.0, 1.0], 1.0),  # team credit: the copy on the reasoner is not counted again
        ((0.0, 1.0), 0.0, [0.0, 1.0], 1.0),  # last credit: as paid
        ((1.0, 0.0), 0.0, [1.0, 0.0], 1.0),  # per-agent credit: each its own
        ((1.1, 1.0), 1.0, [0.1, 1.0], 1.1),  # team credit plus a private bonus (format reward) on the reasoner
    ],
)
def test_chain_rewards_and_the_team_return_count_a_shared_reward_once(rewards, shared, chain, team_return):
    e = chain_episode(rewards, shared)
    assert [s.chain_reward for s in e.steps] == pytest.approx(chain)
    assert e.team_return == pytest.approx(team_return)


def test_each_agent_return_equals_the_team_return_not_a_sum_of_copies():
    steps = flatten([chain_episode((1.0, 1.0), 1.0)])
    _, returns = compute_advantages(steps, torch.zeros(2), gamma=1.0, gamma_agent=1.0, lam=1.0)
    assert returns.tolist() == pytest.approx([1.0, 1.0])  # was [2.0, 1.0]: 1.94 R with gamma_agent=0.99
    _, returns = compute_advantages(steps, torch.zeros(2), gamma=0.99, gamma_agent=0.99, lam=1.0)
    assert returns.tolist() == pytest.approx([0.99, 1.0])  # the reasoner's is the actor's, discounted once


def test_math_chain_reports_the_shared_reward_and_the_evaluation_the_team_return():
    env = marft_envs.make("marft/MathChain-v0", credit="team")
    env.reset(seed=0)
    gold = env.unwrapped.problem.answer if hasattr(env, "unwrapped") else env.problem.answer
    result = None
    while result is None:
        result = env.step({a: f"\\boxed{{{gold}}}" for a in env.ready_agents()})
    assert result.rewards == {"reasoner_0": 1.0, "actor_0": 1.0}
    assert {a: i[SHARED_REWARD] for a, i in result.infos.items()} == {"reasoner_0": 1.0, "actor_0": 1.0}
    solved = chain_episode((1.0, 1.0), 1.0)
    solved.solved = True
    failed = chain_episode((0.0, 0.0), 0.0)
    assert summarize([solved, failed])["mean_return"] == pytest.approx(0.5)  # was 1.0: each copy counted


# -- D2: per-agent standardisation -------------------------------------------------------------------


def test_normalize_per_agent_centres_and_scales_each_agent_on_its_own():
    adv = torch.tensor([1.0, 3.0, 10.0, 20.0])
    agents = torch.tensor([0, 0, 1, 1])
    assert normalize_per_agent(adv, agents).tolist() == pytest.approx([-1.0, 1.0, -1.0, 1.0], abs=1e-6)
    # jointly (mean 8.5, std sqrt(55.25)), the first agent's steps would both be pushed down: mean -6.5 / 7.433
    assert normalize(adv)[:2].mean().item() == pytest.approx(-6.5 / 55.25**0.5, abs=1e-6)


def test_normalize_per_agent_with_a_token_mask_and_a_lone_agent():
    adv = torch.tensor([[1.0, 3.0, 9.0], [5.0, 0.0, 0.0], [2.0, 0.0, 0.0]])
    mask = torch.tensor([[True, True, False], [True, False, False], [True, False, False]])
    out = normalize_per_agent(adv, torch.tensor([0, 0, 1]), mask)
    # agent 0's real tokens 1, 3, 5: mean 3, population std sqrt(8/3); agent 1 has one token: no spread
    std = (8 / 3) ** 0.5
    expected = [-2 / std, 0.0, 0.0, 2 / std, 0.0, 0.0, 0.0, 0.0, 0.0]
    assert out.reshape(-1).tolist() == pytest.approx(expected, abs=1e-6)


def setup_marft(model_dir, episodes_planted=True):
    envs = [marft_envs.make("marft/MathChain-v0") for _ in range(8)]
    model, tokenizer = load_base(str(model_dir))
    policy = LaMASPolicy(model, tokenizer, envs[0].possible_agents)
    algo = MARFT(policy, MARFTConfig(minibatch_size=4), temperature=1.0)
    torch.manual_seed(0)
    episodes = RolloutEngine(policy, Sampling(1.0, 8)).collect(envs, range(8))
    return policy, algo, plant_rewards(episodes) if episodes_planted else episodes


def spy_on_action_ppo_step(monkeypatch, seen, whole=False):
    """Record the advantages each adapter's ``action_ppo.step`` receives (its own rows, or ``whole``: all of them)."""
    step = action_ppo.step

    def spy(policy, optimizer, adapter, steps, idx, advantages, rng, **kwargs):
        seen[adapter] = (advantages if whole else advantages[idx]).clone()
        return step(policy, optimizer, adapter, steps, idx, advantages, rng, **kwargs)

    monkeypatch.setattr(action_ppo, "step", spy)


def test_after_a_marft_update_each_adapters_mean_advantage_is_zero(tiny_model_dir, monkeypatch):
    policy, algo, episodes = setup_marft(tiny_model_dir)
    seen = {}
    spy_on_action_ppo_step(monkeypatch, seen)
    metrics = algo.update(episodes, 0, np.random.default_rng(0))
    assert set(seen) == {"reasoner_0", "actor_0"}
    for adapter, adv in seen.items():
        assert adv.mean().item() == pytest.approx(0.0, abs=1e-6)
        assert adv.std(unbiased=False).item() == pytest.approx(1.0, abs=1e-4)
        assert f"{adapter}/advantage_mean" in metrics and f"{adapter}/advantage_std" in metrics  # per-agent health


# -- D3: no policy step without a spread of returns -------------------------------------------------


@pytest.mark.parametrize(
    "returns, differ", [([0.0, 0.0, 0.0], False), ([1.0, 1.0], False), ([0.0, 1.0, 0.0], True), ([0.0], True), ([], True)]
)
def test_returns_differ(returns, differ):
    assert returns_differ(torch.tensor(returns)) is differ


def test_an_update_with_equal_returns_leaves_every_adapter_bit_identical(tiny_model_dir):
    policy, algo, episodes = setup_marft(tiny_model_dir, episodes_planted=False)
    assert len({e.team_return for e in episodes}) == 1  # a random tiny model earns nothing
    before = {a: [p.detach().clone() for p in policy.parameters(a)] for a in policy.adapters}
    critic_before = [p.detach().clone() for p in algo.critic.head.parameters()]
    metrics = algo.update(episodes, 0, np.random.default_rng(0))
    assert metrics["policy/skipped_equal_returns"] == 1.0
    for a in policy.adapters:
        assert all(torch.equal(x, y) for x, y in zip(before[a], policy.parameters(a))), a
        assert not any(k.startswith(f"{a}/loss") for k in metrics)
    assert any(not torch.equal(x, y) for x, y in zip(critic_before, algo.critic.head.parameters()))  # the critic may still fit


# -- the action-level PPO loss, written once ---------------------------------------------------------


def test_action_ppo_loss_by_hand():
    logp_old = torch.tensor([0.0, 0.0, 0.0])
    adv = torch.tensor([1.0, -1.0, 2.0])
    # ratio 1 everywhere: -mean(A) = -2/3; entropy bonus -0.01 * 0.5; KL penalty +0.1 * 0.2
    loss, stats = action_ppo_loss(
        logp_old.clone(), logp_old, adv, torch.tensor(0.5), torch.tensor(0.2), clip_eps=0.2, entropy_coef=0.01, kl_coef=0.1
    )
    assert loss.item() == pytest.approx(-2 / 3 - 0.005 + 0.02, abs=1e-6)
    assert stats["clip_frac"] == 0.0
    # ratio 1.5 on A = +1 is clipped to 1.2; ratio 0.5 on A = -1 keeps min(-0.5, -0.8) = -0.8; no KL term
    logp = torch.log(torch.tensor([1.5, 0.5]))
    loss, stats = action_ppo_loss(
        logp, torch.zeros(2), torch.tensor([1.0, -1.0]), torch.tensor(0.0), None, clip_eps=0.2, entropy_coef=0.01, kl_coef=0.1
    )
    assert loss.item() == pytest.approx(-(1.2 - 0.8) / 2, abs=1e-6)
    assert stats["clip_frac"] == pytest.approx(1.0)


# -- the earlier behaviour, kept as options for the ablation --------------------------------------------


def test_shared_reward_per_agent_counts_every_copy_as_before():
    steps = flatten([chain_episode((1.0, 1.0), 1.0)])
    _, returns = compute_advantages(steps, torch.zeros(2), gamma=1.0, gamma_agent=1.0, lam=1.0, shared_reward="per_agent")
    assert returns.tolist() == pytest.approx([2.0, 1.0])


def test_batch_scope_and_stepping_on_equal_returns_reproduce_the_earlier_update(tiny_model_dir, monkeypatch):
    policy, algo, episodes = setup_marft(tiny_model_dir, episodes_planted=False)
    algo.config.normalize_scope, algo.config.skip_equal_returns = "batch", False
    seen = {}
    spy_on_action_ppo_step(monkeypatch, seen, whole=True)
    metrics = algo.update(episodes, 0, np.random.default_rng(0))
    assert metrics["policy/skipped_equal_returns"] == 0.0 and set(seen) == {"reasoner_0", "actor_0"}
    adv = seen["reasoner_0"]  # the whole batch, standardised jointly: mean 0 over all steps, not per agent
    assert adv.mean().item() == pytest.approx(0.0, abs=1e-6) and adv.std(unbiased=False).item() == pytest.approx(1.0, abs=1e-4)

"""Multi-agent GRPO: its maths against hand-computed numbers, and a CPU smoke test on the tiny model.

Every expected number is worked out by hand in the comment next to it.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from agent_helpers import episode
from torch.testing import assert_close

import marft_envs
from marft_agents.algorithms.grpo import GRPO, GRPOConfig, grpo_advantages, reward_to_go
from marft_agents.algorithms.losses import grpo_loss, sequence_mean
from marft_agents.models.policy import LaMASPolicy, load_base
from marft_agents.models.sampling import Sampling
from marft_agents.rollout.layered import RolloutEngine

EPS = 1e-6


# ------------------------------------------------------------------------------------------- maths


def test_sequence_mean_averages_each_row_over_its_mask():
    x = torch.tensor([[1.0, 3.0, 100.0], [4.0, -9.0, -9.0], [5.0, 5.0, 5.0]])
    mask = torch.tensor([[True, True, False], [True, False, False], [False, False, False]])
    # row 0: (1 + 3)/2 = 2 ; row 1: 4/1 = 4 ; row 2: no entries -> 0/1 = 0
    assert_close(sequence_mean(x, mask), torch.tensor([2.0, 4.0, 0.0]))


def test_grpo_loss_hand_computed():
    ln = math.log
    old = torch.zeros(2, 2)
    logp = torch.tensor([[ln(1.5), ln(0.9)], [ln(0.5), 50.0]])  # row 1's second token is padding
    mask = torch.tensor([[True, True], [True, False]])
    adv = torch.tensor([2.0, -1.0])
    loss, stats = grpo_loss(logp, old, adv, mask, clip_eps=0.2)
    # row 0 (A=2):  rho=1.5 -> min(1.5*2, 1.2*2) = 2.4 ; rho=0.9 -> min(0.9*2, 0.9*2) = 1.8 ; mean 2.1
    # row 1 (A=-1): rho=0.5 -> min(0.5*-1, 0.8*-1) = -0.8 ; mean -0.8 (the padding is ignored)
    # loss = -(2.1 + -0.8)/2 = -0.65
    assert loss.item() == pytest.approx(-0.65, abs=1e-6)
    # clipped tokens: rho 1.5 and 0.5 (|rho - 1| > 0.2), not 0.9 -> 2 of 3 real tokens
    assert stats["clip_frac"] == pytest.approx(2 / 3)

    ref = logp + ln(2.0)  # log(p_ref / p) = ln 2 at every token
    loss, stats = grpo_loss(logp, old, adv, mask, clip_eps=0.2, logp_ref=ref, kl_coef=0.1)
    # k3 per token = 2 - 1 - ln 2 = 0.3068528 ; every row's mean drops by 0.1 * 0.3068528
    # loss = -0.65 + 0.03068528 = -0.61931472
    assert loss.item() == pytest.approx(-0.65 + 0.1 * (1 - ln(2.0)), abs=1e-6)
    assert stats["kl_ref"] == pytest.approx(1 - ln(2.0), abs=1e-6)


def test_grpo_loss_weights_responses_equally_whatever_their_length():
    # one long response with A=1 at ratio 1 and one 1-token response with A=-1 at ratio 1:
    # per-response means are 1 and -1, so the loss is -(1 - 1)/2 = 0 (a token mean would give -(3-1)/4 = -0.5)
    logp = torch.zeros(2, 3)
    mask = torch.tensor([[True, True, True], [True, False, False]])
    loss, _ = grpo_loss(logp, logp, torch.tensor([1.0, -1.0]), mask, clip_eps=0.2)
    assert loss.item() == pytest.approx(0.0, abs=1e-7)


def test_reward_to_go_sums_rounds_from_the_steps_round_on():
    e = episode(0, [[("a", 0.0), ("b", 0.0)], [("a", 1.0), ("b", 1.0)]])
    # round sums: r0 = 0, r1 = 2 ; gamma 0.5: to-go(1) = 2, to-go(0) = 0 + 0.5*2 = 1
    assert reward_to_go(e, 0.5) == [1.0, 1.0, 2.0, 2.0]
    assert reward_to_go(e, 1.0) == [2.0, 2.0, 2.0, 2.0]


def test_problem_grouping_one_sample_per_episode():
    G = 2
    episodes = [
        episode(0, [[("a", 1.0), ("b", 1.0)]]),  # return 2
        episode(1, [[("a", 0.0), ("b", 0.0)], [("a", 0.0), ("b", 0.0)]]),  # return 0, twice as long
        episode(2, [[("a", 1.0), ("b", 1.0)]]),  # problem 1: all equal
        episode(3, [[("a", 1.0), ("b", 1.0)]]),
    ]
    adv = grpo_advantages(episodes, group_size=G, grouping="problem", gamma=1.0, eps=EPS)
    # problem 0: returns [2, 0], mean 1, std 1 -> [1, -1]/(1 + eps), each broadcast to its episode's steps
    # (step-level statistics would give mean (2*2 + 0*4)/6 = 2/3: the longer episode would weigh more)
    # problem 1: equal returns -> exactly 0
    one = 1 / (1 + EPS)
    assert_close(adv, torch.tensor([one, one, -one, -one, -one, -one, 0, 0, 0, 0]))


def test_agent_round_grouping_compares_one_agent_in_one_round():
    episodes = [
        episode(0, [[("a", 0.0), ("b", 0.0)], [("a", 1.0), ("b", 0.0)]]),  # to-go: round 0 -> 1, round 1 -> 1
        episode(1, [[("a", 1.0), ("b", 1.0)]]),  # to-go: round 0 -> 2
    ]
    adv = grpo_advantages(episodes, group_size=2, grouping="agent_round", gamma=1.0, eps=EPS)
    # group (a, round 0): scores [1, 2] -> mean 1.5, std 0.5 -> [-0.5, 0.5]/(0.5 + eps) ; same for (b, round 0)
    # groups (a, round 1) and (b, round 1): one member each -> 0
    # flatten order: ep0 a0, b0, a1, b1, ep1 a0, b0
    h = 0.5 / (0.5 + EPS)
    assert_close(adv, torch.tensor([-h, -h, 0.0, 0.0, h, h]))
    prob = grpo_advantages(episodes, group_size=2, grouping="problem", gamma=1.0, eps=EPS)
    # problem grouping: returns [1, 2] -> [-1, 1]*0.5/(0.5 + eps), broadcast
    assert_close(prob, torch.tensor([-h] * 4 + [h] * 2))


def test_agent_round_equals_problem_on_one_round_with_a_team_reward():
    # The 2-agent chain of benchmarks/tree_sampling.py has one round. reward_to_go gives every step
    # of a round the round's total, so each (problem, agent, round 0) group holds exactly the
    # problem's episode returns, as the problem group does, whoever the reward was paid to: the two
    # groupings give the same advantages, bit for bit (and that benchmark the same run).
    team = [1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0]  # problem 0: one of four solved; problem 1: all four
    episodes = [episode(k, [[("reasoner_0", r), ("actor_0", 0.0)]]) for k, r in enumerate(team)]
    by_agent = grpo_advantages(episodes, group_size=4, grouping="agent_round", gamma=1.0, eps=EPS)
    by_problem = grpo_advantages(episodes, group_size=4, grouping="problem", gamma=1.0, eps=EPS)
    # problem 0: returns [1, 0, 0, 0] -> mean 0.25, std sqrt(0.1875) = 0.4330 (population, as group_relative)
    top, low = 0.75 / (math.sqrt(0.1875) + EPS), -0.25 / (math.sqrt(0.1875) + EPS)
    assert_close(by_problem, torch.tensor([top, top, low, low, low, low, low, low] + [0.0] * 8))
    assert_close(by_agent, by_problem)


def test_config_errors_say_what_to_do(tiny_model_dir):
    model, tokenizer = load_base(str(tiny_model_dir))
    policy = LaMASPolicy(model, tokenizer, ["solver_0"])
    with pytest.raises(ValueError, match="grouping must be one of"):
        GRPO(policy, GRPOConfig(grouping="trees"), temperature=1.0)
    with pytest.raises(ValueError, match="at least 2"):
        GRPO(policy, GRPOConfig(group_size=1), temperature=1.0)
    algo = GRPO(policy, GRPOConfig(group_size=3), temperature=1.0)
    episodes = [episode(k, [[("solver_0", 0.0)]]) for k in range(4)]
    with pytest.raises(ValueError, match="multiple of grpo.group_size"):
        algo.update(episodes, 0, np.random.default_rng(0))


# ------------------------------------------------------------------------------------- smoke test


def snapshot(policy):
    models = {id(m): m for m in [policy.base, *policy.models.values()]}.values()
    return {(id(m), n): (p.detach().clone(), p.requires_grad) for m in models for n, p in m.named_parameters()}


@pytest.mark.parametrize("grouping, mode", [("problem", "lora"), ("agent_round", "lora"), ("problem", "shared"), ("agent_round", "copies")])
def test_two_updates_change_every_trainable_parameter_and_no_frozen_one(tiny_model_dir, grouping, mode):
    torch.set_num_threads(1)
    G = 4
    envs = [marft_envs.make("marft/MathChain-v0") for _ in range(8)]
    model, tokenizer = load_base(str(tiny_model_dir))
    policy = LaMASPolicy(model, tokenizer, envs[0].possible_agents, mode=mode)
    algo = GRPO(policy, GRPOConfig(group_size=G, grouping=grouping, minibatch_size=2, kl_coef=0.1), temperature=1.0)
    assert algo.group_size == G
    torch.manual_seed(0)
    episodes = RolloutEngine(policy, Sampling(1.0, 8)).collect(envs, range(8), seed_of=lambda i: i // G)
    # a group plays one problem
    questions = [e.steps[0].prompt for e in episodes]
    assert questions[0] == questions[3] and questions[4] == questions[7]
    # the random model never solves anything: give each group a spread of rewards
    for e in episodes:
        for s in e.steps:
            s.reward = float(e.index % 2)
    before = snapshot(policy)
    rng = np.random.default_rng(0)
    for update in range(2):
        metrics = algo.update(episodes, update, rng)
        assert all(np.isfinite(v) for v in metrics.values()), metrics
    assert metrics["grpo/zero_advantage_frac"] == 0.0
    assert {f"{a}/{k}" for a in policy.adapters for k in ("loss", "kl_ref")} <= set(metrics)
    after = snapshot(policy)
    trainable = {k for k, (_, grad) in before.items() if grad}
    assert trainable
    unchanged = [k[1] for k in trainable if torch.equal(before[k][0], after[k][0])]
    assert not unchanged, f"trainable parameters that did not change: {unchanged[:5]}"
    changed_frozen = [k[1] for k in before.keys() - trainable if not torch.equal(before[k][0], after[k][0])]
    assert not changed_frozen, f"frozen parameters that changed: {changed_frozen[:5]}"

    # a checkpoint restores adapters and optimizers
    state = algo.state_dict()
    other = GRPO(policy, GRPOConfig(group_size=G), temperature=1.0)
    other.load_state_dict(state)
    assert all(o.state_dict()["state"] for o in other.optimizers.values())


def test_all_equal_groups_do_not_move_the_policy_without_kl_or_entropy(tiny_model_dir):
    torch.set_num_threads(1)
    envs = [marft_envs.make("marft/MathSolo-v0") for _ in range(4)]
    model, tokenizer = load_base(str(tiny_model_dir))
    policy = LaMASPolicy(model, tokenizer, envs[0].possible_agents)
    algo = GRPO(policy, GRPOConfig(group_size=2, minibatch_size=4, kl_coef=0.0), temperature=1.0)
    episodes = RolloutEngine(policy, Sampling(1.0, 6)).collect(envs, range(4), seed_of=lambda i: i // 2)
    for e in episodes:
        for s in e.steps:
            s.reward = 1.0
    before = [p.detach().clone() for p in policy.parameters("solver_0")]
    metrics = algo.update(episodes, 0, np.random.default_rng(0))
    assert metrics["grpo/zero_advantage_frac"] == 1.0
    assert all(torch.equal(a, b) for a, b in zip(before, policy.parameters("solver_0")))


def test_cli_trains_grpo_with_groups(tiny_model_dir, tmp_path):
    from marft_agents.cli import main as cli

    run = tmp_path / "grpo"
    argv = [
        "train",
        "--algo",
        "grpo",
        "--no-progress",
        f"model={tiny_model_dir}",
        f"run_dir={run}",
        "updates=2",
        "episodes_per_update=4",
        "grpo.group_size=2",
        "eval_episodes=2",
        "eval_rounds=0",
        "max_new_tokens=6",
        "threads=1",
    ]
    assert cli(argv) == 0
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(0.0 <= r["grpo/zero_advantage_frac"] <= 1.0 for r in rows)

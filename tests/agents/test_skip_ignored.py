"""Actions the env will ignore are not generated (``FlexEnv.needs_action``): Booking-v0's unscheduled workers."""

import numpy as np
import pytest
import torch
from agent_helpers import plant_rewards

from marft_agents.algorithms.base import steps_of
from marft_agents.algorithms.marft import MARFT, MARFTConfig
from marft_agents.algorithms.marft_token import MARFTToken
from marft_agents.algorithms.token_ppo import pack
from marft_agents.engines.base import Engine
from marft_agents.models.policy import LaMASPolicy, load_base
from marft_agents.models.sampling import Generation, Sampling
from marft_agents.rollout.layered import RolloutEngine
from marft_envs.tasks.booking import Booking
from marft_envs.tasks.booking.scripted import call

AGENTS = ["coordinator_0", "calendar_0", "location_0", "booking_0"]
# Every round the coordinator schedules only the location agent; everyone else's answer is the same.
TEXTS = {
    "coordinator_0": call("plan", act=["location_0"]),
    "calendar_0": call("wait"),
    "location_0": call("wait"),
    "booking_0": call("respond", message="Booked."),
}


class ByAgent(Engine):
    """Answers each request with its agent's fixed text (one adapter per agent); records every call's adapters."""

    def __init__(self, tokenizer):
        super().__init__()
        self.tokenizer, self.asked = tokenizer, []

    def generate(self, requests, sampling):
        self.calls += 1
        self.asked.append([r.adapter for r in requests])
        texts = [TEXTS[r.adapter] for r in requests]
        ids = [self.tokenizer.encode(t, add_special_tokens=False) for t in texts]
        return Generation(responses=ids, token_logps=[torch.full((len(i),), -1.0) for i in ids], texts=texts)


@pytest.fixture(scope="module")
def policy(tiny_model_dir):
    model, tokenizer = load_base(str(tiny_model_dir))
    return LaMASPolicy(model, tokenizer, AGENTS)


def collect(policy, skip_ignored, episodes=2):
    engine = ByAgent(policy.tokenizer)
    rollout = RolloutEngine(policy, Sampling(1.0, 16), engine=engine, skip_ignored=skip_ignored)
    envs = [Booking(max_rounds=2) for _ in range(2)]
    return rollout.collect(envs, range(episodes)), engine


def test_booking_reports_which_actions_it_will_read():
    env = Booking()
    env.reset(seed=1, options={"kind": "book"})
    assert [env.needs_action(a) for a in AGENTS] == [True] * 4  # before the plan nobody is left out
    env.step({"coordinator_0": call("plan", act=["location_0"])})
    assert [env.needs_action(a) for a in AGENTS] == [True, False, True, False]
    assert [env.needs_action(a) for a in AGENTS] == [True, False, True, False]  # a query: asking changes nothing
    env.step({"calendar_0": "", "location_0": call("wait"), "booking_0": ""})
    assert env.needs_action("calendar_0")  # a new round: the coordinator has not planned it yet


def test_ignored_actions_are_not_generated_and_nothing_else_changes(policy):
    skipped, fast = collect(policy, skip_ignored=True)
    full, slow = collect(policy, skip_ignored=False)
    # per round: the coordinator's layer, then the workers' layer (only the scheduled one when skipping)
    assert fast.asked == [["coordinator_0", "coordinator_0"], ["location_0", "location_0"]] * 2
    assert slow.asked == [["coordinator_0", "coordinator_0"], ["calendar_0", "location_0", "booking_0"] * 2] * 2
    for a, b in zip(skipped, full):
        assert [(s.agent, s.round, s.reward, s.round_end, s.done, s.info) for s in a.steps] == [
            (s.agent, s.round, s.reward, s.round_end, s.done, s.info) for s in b.steps
        ]
        assert [s.prompt for s in a.steps] == [s.prompt for s in b.steps]  # the critic sees the same states
        for s, t in zip(a.steps, b.steps):
            left_out = s.agent in ("calendar_0", "booking_0")
            assert s.skipped is left_out and not t.skipped
            if left_out:
                assert s.response == [] and s.text == "" and s.token_logps.shape == (0,) and t.response
            else:
                assert s.response == t.response and s.text == t.text
    tokens = lambda eps: sum(len(s.response) for e in eps for s in e.steps)  # noqa: E731
    assert tokens(skipped) < tokens(full)


def test_learners_take_no_policy_loss_on_skipped_steps(policy):
    episodes, _ = collect(policy, skip_ignored=True)
    plant_rewards(episodes)  # returns that differ: the update takes a policy step
    steps = [s for e in episodes for s in e.steps]
    assert steps_of(policy, steps, "calendar_0") == []  # every calendar step was skipped
    assert len(steps_of(policy, steps, "location_0")) == 4
    before = {a: [p.detach().clone() for p in policy.parameters(a)] for a in AGENTS}
    frozen = [p.detach().clone() for p in policy.base.parameters() if not p.requires_grad]
    algo = MARFT(policy, MARFTConfig(minibatch_size=4), temperature=1.0)
    metrics = algo.update(episodes, 0, np.random.default_rng(0))
    assert np.isfinite(metrics["critic/value_loss"])

    def moved(a):
        return any(not torch.equal(p, q) for p, q in zip(policy.parameters(a), before[a]))

    assert moved("location_0") and moved("coordinator_0")
    assert not moved("calendar_0") and not moved("booking_0")  # nothing they generated: no step
    assert all(torch.equal(p, q) for p, q in zip((p for p in policy.base.parameters() if not p.requires_grad), frozen))


def test_token_level_learners_keep_generating_and_refuse_skipped_steps(policy):
    assert MARFT.skips_ignored and not MARFTToken.skips_ignored
    episodes, _ = collect(policy, skip_ignored=True, episodes=1)
    with pytest.raises(ValueError, match="skip_ignored=False"):
        pack([s for e in episodes for s in e.steps])

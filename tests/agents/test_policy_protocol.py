"""Every policy matches the protocols the package calls it through (``marft_agents/models/protocol.py``)."""

import inspect

import pytest

from marft_agents.models.bare import ModelAsPolicy
from marft_agents.models.policy import LaMASPolicy, load_base
from marft_agents.models.protocol import Policy, RolloutPolicy
from marft_agents.models.team import TeamPolicy

AGENTS = ["reasoner_0", "actor_0"]


@pytest.fixture(scope="module")
def policies(tiny_model_dir):
    def adapters(agents):
        model, tokenizer = load_base(str(tiny_model_dir))
        return LaMASPolicy(model, tokenizer, agents)

    team = TeamPolicy({"one": adapters(["reasoner_0"]), "other": adapters(["actor_0"])}, AGENTS)
    return {"LaMASPolicy": adapters(AGENTS), "TeamPolicy": team, "ModelAsPolicy": ModelAsPolicy(*load_base(str(tiny_model_dir)))}


def methods(protocol: type) -> dict[str, inspect.Signature]:
    """The protocol's methods (not its properties) by name, with their signatures."""
    own = {n: f for c in protocol.__mro__ if c.__module__ == protocol.__module__ for n, f in vars(c).items() if inspect.isfunction(f)}
    return {n: inspect.signature(f) for n, f in own.items() if not n.startswith("_")}


def accepts(method, wanted: inspect.Signature) -> bool:
    """Whether ``method`` (bound) takes every parameter of ``wanted`` (after ``self``) by the same name and kind."""
    have = inspect.signature(method).parameters
    return all(n in have and have[n].kind == p.kind for n, p in list(wanted.parameters.items())[1:])


@pytest.mark.parametrize("name", ["LaMASPolicy", "TeamPolicy"])
def test_the_adapter_policies_are_policies(policies, name):
    policy = policies[name]
    assert isinstance(policy, Policy) and isinstance(policy, RolloutPolicy)
    wrong = [m for m, signature in methods(Policy).items() if not accepts(getattr(policy, m), signature)]
    assert not wrong, f"{name}'s {wrong} do not take the protocol's parameters"


def test_a_model_without_adapters_is_a_rollout_policy_only(policies):
    bare = policies["ModelAsPolicy"]
    assert isinstance(bare, RolloutPolicy) and not isinstance(bare, Policy)
    wrong = [m for m, signature in methods(RolloutPolicy).items() if not accepts(getattr(bare, m), signature)]
    assert not wrong, f"ModelAsPolicy's {wrong} do not take the protocol's parameters"


def test_a_team_of_models_says_so(policies):
    assert [policies[n].is_team for n in ("LaMASPolicy", "TeamPolicy", "ModelAsPolicy")] == [False, True, False]
    assert {policies["TeamPolicy"].width_of(a) for a in AGENTS} == {policies["LaMASPolicy"].hidden_size}


def test_an_object_missing_a_member_is_not_a_policy():
    class NoGenerate:
        adapter_of = {}
        is_team = False
        device = "cpu"

        def prompt(self, observation, agent=None):
            return []

    assert not isinstance(NoGenerate(), RolloutPolicy)
    assert {"score", "features", "parameters", "kl_reference"} <= set(methods(Policy))

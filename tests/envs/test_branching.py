"""Branching (FlexEnv.branch): copies mid-episode, the one-line refusal, and check_env's branching check."""

import copy
import threading

import pytest
from toy_envs import Coordinated, Echo, Guess

from marft_envs import DependencyGraph, FlexEnv, RoundResult
from marft_envs.branching import NotBranchableError, require_branching, shared_attributes
from marft_envs.testing import check_branching, check_env, random_policy


class Dice(FlexEnv):
    """A roller and a caller; each round's die is drawn from np_random in end_round (randomness mid-episode)."""

    metadata = {"name": "toy/Dice-v0", "is_parallelizable": False, "render_modes": ["ansi"]}

    def __init__(self):
        super().__init__(["roller_0", "caller_0"])

    def reset_task(self, options):
        self.rolls = [int(self.np_random.integers(1, 7))]

    def observe_text(self, agent):
        return f"rolls so far: {self.rolls}; roller said {self.round_actions.get('roller_0', '-')}"

    def round_graph(self):
        return DependencyGraph.chain(self.possible_agents)

    def end_round(self, actions):
        hit = float(actions["caller_0"].strip() == str(self.rolls[-1]))
        self.rolls.append(int(self.np_random.integers(1, 7)))  # the branch must draw the same next die
        done = len(self.rolls) > 3
        return RoundResult(
            rewards={"caller_0": hit}, terminations=dict.fromkeys(actions, done), infos={"caller_0": {"reward_components": {"hit": hit}}}
        )


def test_a_branch_taken_mid_round_plays_on_like_the_original_and_alone():
    env = Coordinated()
    env.reset(seed=0)
    env.step({"coordinator_0": "a>b"})  # the plan is in; the workers have not acted
    env.step({"worker_0": "first"})  # mid-round: worker_1 still waits
    twin = env.branch()
    assert twin is not env and twin.ready_agents() == env.ready_agents() == ["worker_1"]
    seen = {"instructions": "", "text": "coordinator_0 said a>b; worker_0 said first"}
    assert twin.observe("worker_1") == env.observe("worker_1") == seen
    assert twin.round_actions is not env.round_actions and twin.infos == env.infos
    result = twin.step({"worker_1": "second"})
    assert result is not None and twin.agents == []
    assert env.ready_agents() == ["worker_1"] and env.round_actions == {"coordinator_0": "a>b", "worker_0": "first"}
    assert env.step({"worker_1": "second"}).rewards == result.rewards


def test_a_branch_of_a_dec_pomdp_layer_half_stepped():
    env = Guess(n=3)
    env.reset(seed=4)
    env.step({"guesser_0": "1"})  # one of three independent agents has acted
    twin = env.branch()
    assert twin.ready_agents() == ["guesser_1", "guesser_2"]
    assert twin.step({"guesser_1": "2", "guesser_2": "3"}).rewards == env.step({"guesser_1": "2", "guesser_2": "3"}).rewards


def test_the_random_generator_is_part_of_the_copy():
    env = Dice()
    env.reset(seed=3)
    env.step({"roller_0": "go"})
    twin = env.branch()
    assert twin.np_random is not env.np_random
    assert twin.step({"caller_0": "4"}) == env.step({"caller_0": "4"})
    assert twin.rolls == env.rolls and twin.rolls is not env.rolls  # the die drawn in end_round is the same
    assert twin.reset() == env.reset() and twin.rolls == env.rolls  # and so is the next, unseeded episode


def test_a_branch_before_reset_and_after_the_end():
    fresh = Echo().branch()
    with pytest.raises(Exception, match="call reset"):
        fresh.observe("speaker_0")
    env = Echo(rounds=1)
    env.reset(seed=0)
    env.step({"speaker_0": "red"})
    env.step({"listener_0": "red"})
    done = env.branch()
    assert done.agents == [] and done.info("listener_0") == env.info("listener_0")


def test_shared_attributes_add_up_along_the_class_hierarchy():
    class Base(Echo):
        branch_shared = ("catalogue",)

    class Child(Base):
        branch_shared = ("index",)

    env = Child()
    env.catalogue, env.index, env.notes = ["a"], {"a": 0}, ["mine"]
    assert shared_attributes(env) == {"_observation_spaces", "_action_spaces", "catalogue", "index"}
    twin = env.branch()
    assert twin.catalogue is env.catalogue and twin.index is env.index  # shared: never changed in place
    assert twin.notes == env.notes and twin.notes is not env.notes  # episode state: copied
    assert twin.observation_space("speaker_0") is env.observation_space("speaker_0")


# -- the refusal -----------------------------------------------------------------------------------


class ForeignEnv:
    """A user's env that speaks the layered interface but is no FlexEnv: it has no branch()."""

    metadata = {"name": "me/Foreign-v0"}
    possible_agents = ["a_0"]


def test_require_branching_refuses_an_env_without_the_method_in_one_line():
    with pytest.raises(NotBranchableError) as err:
        require_branching(ForeignEnv())
    message = str(err.value)
    assert "\n" not in message and isinstance(err.value, TypeError)
    assert message.startswith(
        "tree sampling needs an env that can copy its state mid-episode, but me/Foreign-v0 (ForeignEnv) has no branch() method"
    )
    assert "turn tree sampling off" in message
    with pytest.raises(NotBranchableError, match="^dynamic sampling needs"):
        require_branching(ForeignEnv(), purpose="dynamic sampling")
    require_branching(Echo())  # a FlexEnv branches


class Session(Echo):
    """Its state lives elsewhere (say, a remote game): it declares that it cannot branch."""

    branchable = False


def test_an_env_that_declares_branchable_false_is_refused_and_skipped_by_check_env():
    with pytest.raises(NotBranchableError, match=r"toy/Echo-v0 \(Session\) declares branchable = False"):
        require_branching(Session())
    env = Session()
    env.reset(seed=0)
    with pytest.raises(NotBranchableError, match="declares branchable = False"):
        env.branch()
    report = check_env(Session, seeds=range(2))
    assert "marft.branching" not in report.passed and "marft.determinism" in report.passed


class Locked(Echo):
    def reset_task(self, options):
        super().reset_task(options)
        self.lock = threading.Lock()


def test_a_branch_whose_state_does_not_copy_names_the_attribute():
    env = Locked()
    env.reset(seed=0)
    with pytest.raises(NotBranchableError) as err:
        env.branch()
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("toy/Echo-v0 (Locked).branch(): its attribute 'lock' (lock) cannot be copied (TypeError:")
    assert message.endswith("name it in branch_shared if it is read-only, override branch(), or set branchable = False")


def test_check_env_runs_the_branching_check_on_toy_envs():
    for make in (Echo, Guess, Coordinated, Dice):
        assert "marft.branching" in check_env(make, seeds=range(4)).passed


# -- the check catches broken branches -------------------------------------------------------------


class SharesTheRolls(Dice):
    def branch(self):
        return copy.copy(self)  # shallow: the rolls list (and round_actions) are shared with the original


class ReseedsTheBranch(Dice):
    def branch(self):
        twin = copy.deepcopy(self)
        twin.reset(seed=0)  # a "copy" that starts over
        return twin


class ForgetsTheGenerator(Dice):
    def branch(self):
        import numpy as np

        twin = copy.deepcopy(self)
        twin.np_random = np.random.default_rng(12345)  # the state, but not the random generator's
        return twin


class ReturnsItself(Dice):
    def branch(self):
        return self


@pytest.mark.parametrize(
    "broken, message",
    [
        (SharesTheRolls, "raised (FlexEnvError|EnvUsageError): .*share no mutable state"),
        (ReseedsTheBranch, "diverges from the original|raised (FlexEnvError|EnvUsageError): .*exact state"),
        (ForgetsTheGenerator, "diverges from the original|draws another next episode"),
        (ReturnsItself, "must return a new env"),
    ],
)
def test_check_branching_catches_a_broken_branch(broken, message):
    with pytest.raises(AssertionError, match=message):
        check_branching(broken, seeds=range(4), policy=random_policy)
    check_branching(Dice, seeds=range(4), policy=random_policy)  # the honest one passes


class DrawsOnlyAtReset(Echo):
    def branch(self):
        import numpy as np

        twin = copy.deepcopy(self)
        twin.np_random = np.random.default_rng(999)
        return twin


def test_check_branching_catches_a_lost_generator_even_when_steps_draw_nothing():
    # Echo draws only at reset: the branch's own episode matches; its next episode does not.
    with pytest.raises(AssertionError, match="draws another next episode"):
        check_branching(DrawsOnlyAtReset, seeds=range(3), policy=random_policy)

"""Toy tasks whose reward a random tiny model sometimes earns (for the signal and update tests).

ParityTask, a one-agent task with difficulty levels.

Level 0: the reward is 1 when the response has an even number of characters (a coin flip for a random
model, so a group's rewards often differ); level 1: never rewarded. ``solved`` is reported.
"""

import enum

import numpy as np

from marft_envs import DependencyGraph, FlexEnv, RoundResult
from marft_envs.outcomes import SHARED_REWARD


class ParityTask(FlexEnv):
    """solver_0 answers once; at level 0 an even-length answer wins, at level 1 nothing does."""

    metadata = {"name": "tests/Parity-v0", "is_parallelizable": True, "render_modes": ["ansi"]}
    reset_options = ("difficulty",)

    def __init__(self, levels: bool = True):
        super().__init__(["solver_0"])
        self.levels = levels

    def difficulties(self):
        return (0, 1) if self.levels else ()

    def reset_task(self, options):
        self.level = options.get("difficulty", int(self.np_random.integers(2)) if self.levels else 0)

    def observe_text(self, agent):
        return f"Level {self.level}: say something."

    def end_round(self, actions):
        win = self.level == 0 and len(actions["solver_0"]) % 2 == 0
        return RoundResult(rewards={"solver_0": float(win)}, terminations={"solver_0": True}, infos={"solver_0": {"solved": win}})


class ParityChain(FlexEnv):
    """reasoner_0 -> actor_0, one round; the team (both agents, ``credit="team"``) wins when the actor's
    answer has an even number of characters: a coin flip for a random model, so a batch's returns differ."""

    metadata = {"name": "tests/ParityChain-v0", "is_parallelizable": False, "render_modes": ["ansi"]}

    def __init__(self):
        super().__init__(["reasoner_0", "actor_0"])

    def reset_task(self, options):
        pass

    def round_graph(self):
        return DependencyGraph.chain(self.possible_agents)

    def observe_text(self, agent):
        return "Say something." if agent == "reasoner_0" else f"Teammate: {self.round_actions.get('reasoner_0', '')}"

    def end_round(self, actions):
        win = float(len(actions["actor_0"]) % 2 == 0)
        infos = {a: {"solved": bool(win), SHARED_REWARD: win} for a in actions}
        return RoundResult(rewards=dict.fromkeys(actions, win), terminations=dict.fromkeys(actions, True), infos=infos)


# -- difficulty levels a curriculum must check (issue 38): kinds a checkpoint could not hold, and broken ones


class Level(enum.Enum):
    """Levels as Enum members: the env is given the members, checkpoints hold ``Level.EASY``."""

    EASY = 0
    HARD = 1


class NumpyLevels(ParityTask):
    """ParityTask whose levels are NumPy integers (what ``np.arange`` gives)."""

    def difficulties(self):
        return tuple(np.arange(2))


class EnumLevels(ParityTask):
    """ParityTask whose levels are Enum members."""

    def difficulties(self):
        return (Level.EASY, Level.HARD)

    def reset_task(self, options):
        level = options.get("difficulty", Level.EASY)
        assert isinstance(level, Level), level  # the env is given its own levels, not their plain form
        self.level = level.value


class NanLevels(ParityTask):
    def difficulties(self):
        return (0.0, float("nan"))


class DuplicateLevels(ParityTask):
    def difficulties(self):
        return (0, 1, 1)


class UnhashableLevels(ParityTask):
    def difficulties(self):
        return ([0], [1])


class RaisingLevels(ParityTask):
    def difficulties(self):
        raise RuntimeError("the level table is gone")


class FlatTask(ParityTask):
    """solver_0 answers once and is never rewarded: every group is uninformative (dynamic sampling never has enough)."""

    def __init__(self):
        super().__init__(levels=False)

    def end_round(self, actions):
        return RoundResult(rewards={"solver_0": 0.0}, terminations={"solver_0": True}, infos={"solver_0": {"solved": False}})


class ParityAnswers(ParityChain):
    """ParityChain whose agents report an answer (``info["answer"]``: the parity of their action's length)
    and their own score (an even length is right): the copy-rate and agreement diagnostics have data."""

    metadata = {**ParityChain.metadata, "name": "tests/ParityAnswers-v0"}

    def end_round(self, actions):
        result = super().end_round(actions)
        for agent, text in actions.items():
            answer = "even" if len(text) % 2 == 0 else "odd"
            result.infos[agent].update(answer=answer, reward_components={"own_correct": float(answer == "even")})
        return result


class CreditChain(ParityChain):
    """ParityChain as a user would write it: the team is paid through ``assign_credit("team")``, no info key named."""

    metadata = {"name": "tests/CreditChain-v0", "is_parallelizable": False, "render_modes": ["ansi"]}

    def end_round(self, actions):
        from marft_envs.rewards.credit import assign_credit

        win = float(len(actions["actor_0"]) % 2 == 0)
        rewards = assign_credit("team", list(self.possible_agents), win)
        infos = {a: {"solved": bool(win)} for a in actions}
        return RoundResult(rewards=rewards, terminations=dict.fromkeys(actions, True), infos=infos)

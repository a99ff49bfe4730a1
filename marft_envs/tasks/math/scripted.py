"""Scripted (non-LLM) policies for the MATH envs: for demos, benchmarks and tests.

- :class:`SlipReasoner` plays a reasoner or solver that *peeks at the worked solution* and copies
  it, but slips (changes the last value by a small amount) with probability ``slip``. It stands in
  for an imperfect model; it is not a solver.
- :func:`copy_actor` reads the last ``=value`` it is shown and answers ``\\boxed{value}``: it
  really uses its observation, so a chain's accuracy depends on its reasoner.
"""

from __future__ import annotations

import re
from fractions import Fraction

import numpy as np

from marft_envs.core import FlexEnv
from marft_envs.tasks.math.jigsaw_problems import read_facts

_SHOWN = re.compile(r"^(?:Your part of the problem|Message from \w+): (.*)$")
_LAST_VALUE = re.compile(r"=\s*(-?\d+(?:/\d+)?)\s*$")


def _fraction_text(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


class SlipReasoner:
    """Copies the problem's worked solution, slipping on the last value with probability ``slip``."""

    def __init__(self, env: FlexEnv, slip: float = 0.3, boxed: bool = False):
        self.env = env
        self.slip = slip
        self.boxed = boxed

    def __call__(self, agent: str, observation: dict, rng: np.random.Generator) -> str:
        steps = self.env.problem.solution.strip().splitlines() or [f"x={self.env.problem.answer}"]
        match = _LAST_VALUE.search(steps[-1])
        if match and rng.random() < self.slip:
            wrong = Fraction(match.group(1)) + int(rng.choice([-2, -1, 1, 2]))
            steps[-1] = steps[-1][: match.start(1)] + _fraction_text(wrong)
        text = "\n".join(steps)
        if self.boxed:
            last = _LAST_VALUE.search(steps[-1])
            text += f"\n\\boxed{{{last.group(1) if last else self.env.problem.answer}}}"
        return text


def copy_actor(agent: str, observation: dict, rng: np.random.Generator) -> str:
    """Answer with the last ``=value`` in the observation (what an attentive actor would do)."""
    values = [m.group(1) for line in observation["text"].splitlines() if (m := _LAST_VALUE.search(line))]
    return f"\\boxed{{{values[-1]}}}" if values else "I do not know."


def chain_policy(env: FlexEnv, slip: float = 0.3):
    """A scripted policy for ``MathChain``: slipping reasoners, a copying actor."""
    reasoner = SlipReasoner(env, slip)

    def policy(agent: str, observation: dict, rng: np.random.Generator) -> str:
        return copy_actor(agent, observation, rng) if agent.startswith("actor") else reasoner(agent, observation, rng)

    return policy


def solver_policy(env: FlexEnv, slip: float = 0.3):
    """A scripted policy for ``MathDebate`` and ``MathSolo``: each solver slips on its own."""
    return SlipReasoner(env, slip, boxed=True)


def shown_parts(text: str) -> list[str]:
    """The story text of a MathJigsaw observation: its own part and its parents' messages, without the labels."""
    return [m.group(1) for line in text.splitlines() if (m := _SHOWN.match(line))]


def jigsaw_policy(env: FlexEnv, slip: float = 0.3):
    """A scripted policy for ``MathJigsaw``: sharers pass on what they see, the answerer adds it up."""

    def policy(agent: str, observation: dict, rng: np.random.Generator) -> str:
        parts = shown_parts(observation["text"])
        if agent.startswith("answerer"):
            facts = read_facts(" ".join(parts))
            return f"\\boxed{{{sum(facts)}}}" if facts else "I do not know."
        message = " ".join(parts)
        if rng.random() < slip:  # change the first number by a little: the message still reads, but is wrong
            message = re.sub(r"\d+", lambda m: str(int(m.group()) + int(rng.choice([1, 2]))), message, count=1)
        return message

    return policy

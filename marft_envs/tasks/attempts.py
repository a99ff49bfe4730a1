"""Attempts with feedback: what the MATH and code-repair families share.

An episode is one problem (a math question, a buggy program) drawn from a source with
``sample(rng)`` and ``heldout(n, seed)``. Each round is one attempt by the whole team. With
``rounds=1`` (single pass) the episode ends after the first attempt; with ``rounds>1`` and
``feedback=True`` the team is told how its attempt did and tries again until it succeeds or runs out
of attempts (the MARFT paper's protocol). ``max_cycles=N``, PettingZoo's name for a round limit, is
``rounds=N`` (when given, it replaces ``rounds``): at most N rounds, fewer when an attempt succeeds
(or, without feedback, after the first, except in a debate, which runs all its rounds).

``rounds`` is these families' attempts option: they are registered with ``attempts_option="rounds"``
and ``eval_kwargs={"split": "test"}``, so held-out evaluation sets it (:mod:`marft_agents.rollout.evaluation`).

Role prompts come from a profile (:mod:`marft_envs.tasks.profiles`); rewards are split between the
agents by a credit mode (:mod:`marft_envs.rewards.credit`). A family says which package ships its
default profile, what a problem is, how an attempt is graded and what each agent observes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from marft_envs.core import FlexEnv, RoundResult
from marft_envs.outcomes import SHARED_REWARD
from marft_envs.rewards.credit import CREDIT_MODES, assign_credit, shared_part
from marft_envs.tasks import profiles
from marft_envs.tasks.profiles import role_of
from marft_envs.validation import MAX_HELDOUT, check_heldout_n


class AttemptsTask(FlexEnv):
    """Base of the attempts-with-feedback envs: one problem per episode, profile prompts, credit, feedback rounds."""

    profile_package: str = ""
    """The package whose ``profiles/default.json`` is the family's default profile."""
    problem_type: type = object
    """What ``reset(options={"problem": ...})`` accepts."""
    reset_options = ("problem",)
    branch_shared = ("problems", "profile")  # read-only; a source may hold a lock and a test runner

    def __init__(
        self,
        possible_agents: list[str],
        *,
        profile: str | Path | dict = "default",
        rounds: int = 1,
        feedback: bool = True,
        credit: str = "team",
        render_mode: str | None = None,
        max_cycles: int | None = None,
    ):
        super().__init__(possible_agents, render_mode=render_mode)
        if max_cycles is not None:  # PettingZoo's name for the same limit (pettingzoo.make(..., max_cycles=N))
            if isinstance(max_cycles, bool) or not isinstance(max_cycles, int) or max_cycles < 1:
                raise ValueError(f"max_cycles (the number of rounds) must be a positive integer, got {max_cycles!r}")
            rounds = max_cycles
        if rounds < 1:
            raise ValueError(f"rounds must be at least 1, got {rounds}")
        if credit not in CREDIT_MODES:
            raise ValueError(f"unknown credit mode {credit!r}: use one of {list(CREDIT_MODES)}")
        self.profile = profiles.load_profile(profile, self.profile_package, agents=possible_agents)
        self.max_rounds = rounds
        self.feedback = feedback
        self.credit = credit
        self.problems: Any = None  # the family's problem source: sample(rng), heldout(n, seed)
        self.problem: Any = None
        self.attempts: list[dict[str, Any]] = []

    # -- FlexEnv hooks shared by the families -----------------------------------------------------

    def reset_task(self, options: dict[str, Any]) -> None:
        problem = self.problem_option(options)
        if problem is not None and not isinstance(problem, self.problem_type):
            raise TypeError(f"options['problem'] must be a {self.problem_type.__name__}, got {type(problem).__name__}")
        self.problem = problem or self.problems.sample(self.np_random)
        self.attempts = []

    def problem_option(self, options: dict[str, Any]) -> Any:
        """The problem ``reset`` was asked for (``options["problem"]``), or None to draw one."""
        return options.get("problem")

    def instructions(self, agent: str) -> str:
        return self.profile["roles"][role_of(agent)]

    def heldout_options(self, n: int, seed: int) -> list[dict[str, Any]]:
        """One ``{"problem": ...}`` per problem of the source's fixed held-out set (up to ``n``; more than the
        source's ``max_heldout``, negative or not an integer: ValueError in one line)."""
        n = check_heldout_n(n, getattr(self.problems, "max_heldout", MAX_HELDOUT), f"{self.name}.heldout_options")
        return [{"problem": p} for p in self.problems.heldout(n, seed=seed)]

    # -- the end of an attempt --------------------------------------------------------------------

    def attempt_result(self, solved: bool, team: float, own: dict[str, float], infos: dict[str, dict[str, Any]]) -> RoundResult:
        """The round's result once the attempt is in ``self.attempts``: rewards by the credit mode, and the
        episode ends when the attempt succeeded, the attempts ran out, or there is no feedback to retry on."""
        done = solved or len(self.attempts) >= self.max_rounds or not self.feedback
        order = list(self.graph.order())
        rewards = assign_credit(self.credit, order, team, {a: own[a] for a in order})
        for a in order:
            infos.setdefault(a, {})[SHARED_REWARD] = shared_part(self.credit, team)
        return RoundResult(rewards=rewards, terminations=dict.fromkeys(order, done), infos=infos)

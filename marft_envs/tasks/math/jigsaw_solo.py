"""``marft/MathJigsawSolo-v0``: one agent sees the whole MathJigsaw story (the team's full-information bound).

``marft/MathJigsaw-v2`` cuts each story into shares so that no agent can answer alone; this env gives
the same stories whole to one solver, ``solver_0``, which answers with ``\\boxed{}``. It holds everything the
team's agents hold together: the bound a team of partial views approaches, so the gap between a team and
this solver (the same model, trained or untuned alike) is what splitting the problem costs. ``n_shares``
names the team it bounds: with the same ``n_shares`` (MathJigsaw's ``n_agents``), ``levels`` and ``split``,
the held-out problems are the team's own, story for story (the same uids), so two evaluations pair
problem by problem.

Observations are MathSolo's: ``Problem: <the whole story and its question>``, then the feedback on
earlier attempts. Rewards and grading are the MATH family's (the team reward is 1 when the answer is
right). It has a Gymnasium view: ``gymnasium.make("marft/MathJigsawSolo-v0")``.

Options: ``n_shares`` (default 2), ``levels`` (one or more of 1-3, default all), ``split`` (``"train"``,
``"validation"`` or ``"test"``, the stories' split by arithmetic), ``profile`` (default
``"general-v0"``: its ``solver`` prompt, written for general instruct models as ``jigsaw-v0`` is),
``rounds`` and ``feedback``, ``format_reward``, ``render_mode``, ``max_cycles``.

Version history: the family's, in :mod:`marft_envs.tasks.math`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from marft_envs.tasks.math.jigsaw_problems import LEVELS, JigsawMath
from marft_envs.tasks.math.solo import MathSolo
from marft_envs.validation import MAX_AGENTS


class MathJigsawSolo(MathSolo):
    """One solver on the whole of a MathJigsaw story."""

    metadata = {**MathSolo.metadata, "name": "marft/MathJigsawSolo-v0"}

    def __init__(
        self,
        n_shares: int = 2,
        levels: int | tuple[int, ...] = tuple(LEVELS),
        split: str = "train",
        profile: str | Path | dict = "general-v0",
        rounds: int = 1,
        feedback: bool = True,
        format_reward: float = 0.0,
        render_mode: str | None = None,
        max_cycles: int | None = None,
    ):
        if not isinstance(n_shares, (int, np.integer)) or isinstance(n_shares, bool) or not 2 <= n_shares <= MAX_AGENTS:
            raise ValueError(f"n_shares (the agents of the MathJigsaw team this bounds) must be 2 to {MAX_AGENTS}, got {n_shares!r}"[:200])
        super().__init__(
            problems=JigsawMath(int(n_shares), levels, split, split_by=self.split_by),
            split=split,
            profile=profile,
            rounds=rounds,
            feedback=feedback,
            format_reward=format_reward,
            render_mode=render_mode,
            max_cycles=max_cycles,
        )

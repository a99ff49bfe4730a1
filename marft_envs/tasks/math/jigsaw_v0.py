"""``marft/MathJigsaw-v0``: MathJigsaw as first released, kept registered so that old results can be rerun.

It is :class:`~marft_envs.tasks.math.jigsaw.MathJigsaw` (``marft/MathJigsaw-v1``, whose docstring is the
reference) in all but one thing: a sharer's message is read as runs of digits, signs dropped, so a sharer
that passes its 27 on as ``-27`` (or ``minus 27``) is paid as if it had passed 27. New work uses v1.

Version history: the family's, in :mod:`marft_envs.tasks.math`.
"""

from __future__ import annotations

from marft_envs.tasks.math.jigsaw import MathJigsaw


class MathJigsawV0(MathJigsaw):
    """MathJigsaw with v0's sharer grader: the digits of each number, without its sign."""

    metadata = {**MathJigsaw.metadata, "name": "marft/MathJigsaw-v0"}
    signed_numbers = False

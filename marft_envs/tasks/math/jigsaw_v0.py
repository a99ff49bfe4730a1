"""``marft/MathJigsaw-v0``: MathJigsaw as first released, kept registered so that old results can be rerun.

It is ``marft/MathJigsaw-v1`` (:class:`~marft_envs.tasks.math.jigsaw_v1.MathJigsawV1`: the uid split) in
all but one thing: a sharer's message is read as runs of digits, signs dropped, so a sharer that passes
its 27 on as ``-27`` (or ``minus 27``) is paid as if it had passed 27. New work uses
``marft/MathJigsaw-v2`` (:class:`~marft_envs.tasks.math.jigsaw.MathJigsaw`, whose docstring is the reference).

Version history: the family's, in :mod:`marft_envs.tasks.math`.
"""

from __future__ import annotations

from marft_envs.tasks.math.jigsaw_v1 import MathJigsawV1


class MathJigsawV0(MathJigsawV1):
    """MathJigsaw-v1 with v0's sharer grader: the digits of each number, without its sign."""

    metadata = {**MathJigsawV1.metadata, "name": "marft/MathJigsaw-v0"}
    signed_numbers = False

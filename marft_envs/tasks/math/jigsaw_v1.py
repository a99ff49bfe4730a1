"""``marft/MathJigsaw-v1``: MathJigsaw as released in issue 51, kept registered so that old results can be rerun.

It is :class:`~marft_envs.tasks.math.jigsaw.MathJigsaw` (``marft/MathJigsaw-v2``, whose docstring is the
reference) in all but one thing: its stories are split into train and test by a hash of the uid (the
quantities in story order, ``split_by="uid"``, :mod:`marft_envs.tasks.math.jigsaw_problems`), so a story
told in another order (the same numbers and answer) can fall on the other side, and there is no
validation split. New work uses v2.

Version history: the family's, in :mod:`marft_envs.tasks.math`.
"""

from __future__ import annotations

from marft_envs.tasks.math.jigsaw import MathJigsaw


class MathJigsawV1(MathJigsaw):
    """MathJigsaw on the uid split."""

    metadata = {**MathJigsaw.metadata, "name": "marft/MathJigsaw-v1"}
    split_by = "uid"

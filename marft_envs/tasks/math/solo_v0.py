"""``marft/MathSolo-v0``: MathSolo as first released, kept registered so that old results can be rerun.

It is :class:`~marft_envs.tasks.math.solo.MathSolo` (``marft/MathSolo-v1``, whose docstring is the
reference) in all but one thing: a ``"synthetic"`` problem spec (the default) is split into train and
test by uid, as released (``split_by="uid"``, :mod:`marft_envs.tasks.math.synthetic`), so most test
problems' numbers and answer occur in train under another wording, and there is no validation split.
New work uses v1.

Version history: the family's, in :mod:`marft_envs.tasks.math`.
"""

from __future__ import annotations

from marft_envs.tasks.math.solo import MathSolo


class MathSoloV0(MathSolo):
    """MathSolo on the first release's synthetic split by uid."""

    metadata = {**MathSolo.metadata, "name": "marft/MathSolo-v0"}
    split_by = "uid"

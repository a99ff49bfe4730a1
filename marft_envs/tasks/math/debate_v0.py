"""``marft/MathDebate-v0``: MathDebate as first released, kept registered so that old results can be rerun.

It is :class:`~marft_envs.tasks.math.debate.MathDebate` (``marft/MathDebate-v1``, whose docstring is the
reference) in all but one thing: a ``"synthetic"`` problem spec (the default) is split into train and
test by uid, as released (``split_by="uid"``, :mod:`marft_envs.tasks.math.synthetic`), so most test
problems' numbers and answer occur in train under another wording, and there is no validation split.
New work uses v1.

Version history: the family's, in :mod:`marft_envs.tasks.math`.
"""

from __future__ import annotations

from marft_envs.tasks.math.debate import MathDebate


class MathDebateV0(MathDebate):
    """MathDebate on the first release's synthetic split by uid."""

    metadata = {**MathDebate.metadata, "name": "marft/MathDebate-v0"}
    split_by = "uid"

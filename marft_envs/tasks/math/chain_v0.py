"""``marft/MathChain-v0``: MathChain as first released, kept registered so that old results can be rerun.

It is :class:`~marft_envs.tasks.math.chain.MathChain` (``marft/MathChain-v1``, whose docstring is the
reference) in all but one thing: a ``"synthetic"`` problem spec (the default) is split into train and
test by uid, as released (``split_by="uid"``, :mod:`marft_envs.tasks.math.synthetic`), so most test
problems' numbers and answer occur in train under another wording, and there is no validation split.
New work uses v1.

Version history: the family's, in :mod:`marft_envs.tasks.math`.
"""

from __future__ import annotations

from marft_envs.tasks.math.chain import MathChain


class MathChainV0(MathChain):
    """MathChain on the first release's synthetic split by uid."""

    metadata = {**MathChain.metadata, "name": "marft/MathChain-v0"}
    split_by = "uid"

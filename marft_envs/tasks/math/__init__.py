"""The MATH family: chain (reasoner -> actor), debate, and solo envs over one problem interface."""

from marft_envs.tasks.math.chain import MathChain
from marft_envs.tasks.math.debate import MathDebate
from marft_envs.tasks.math.solo import MathSolo

__all__ = ["MathChain", "MathDebate", "MathSolo"]

"""The MATH family: chain (reasoner -> actor), debate, solo, CORY and jigsaw envs over one problem interface."""

from marft_envs.tasks.math.chain import MathChain
from marft_envs.tasks.math.cory import MathCORY
from marft_envs.tasks.math.debate import MathDebate
from marft_envs.tasks.math.jigsaw import MathJigsaw
from marft_envs.tasks.math.solo import MathSolo

__all__ = ["MathCORY", "MathChain", "MathDebate", "MathJigsaw", "MathSolo"]

"""The code-repair family: chain (locator -> fixer), vote (independent fixers), and solo envs.

Tasks are buggy Python programs with unit tests (:mod:`marft_envs.tasks.code.tasks`); patches are
graded by running the tests in the sandbox (:mod:`marft_envs.sandbox`).
"""

from marft_envs.tasks.code.chain import CodeRepairChain
from marft_envs.tasks.code.solo import CodeRepairSolo
from marft_envs.tasks.code.vote import CodeRepairVote

__all__ = ["CodeRepairChain", "CodeRepairSolo", "CodeRepairVote"]

"""The code-repair family: chain (locator -> fixer), vote (independent fixers), and solo envs.

Tasks are buggy Python programs with unit tests (:mod:`marft_envs.tasks.code.tasks`); patches are
graded by running the tests in the sandbox (:mod:`marft_envs.sandbox`).

Version history, one for the family's envs (each env's module docstring points here; when to add an id:
``docs/contract.md``, "Versioning"). Under each id, its changes, oldest first:
    ``marft/CodeRepair-v0``, ``marft/CodeRepairVote-v0``, ``marft/CodeRepairSolo-v0``:
        first release.
        fixes kept under the same id (the same rewards for fixes that use the standard library): a
            program runs in a root of its own (the standard library and its working directory; no
            third-party packages, task data or checkout), under a syscall filter; text crossing the env is
            valid UTF-8.
        additions under the same id (rewards unchanged): each round's infos carry ``shared_reward``
            (``marft_envs.outcomes.SHARED_REWARD``: the part of every agent's reward that all received alike,
            the team reward under ``credit="team"``), so the team's return counts it once, not once per agent.
        the judge hardened (issue 38; every shipped task's solution and buggy program, and in
            ``marft/CodeRepair-v0`` the oracle tester, score as before): one of the program's objects is never
            compared with plain data nor asked whether it is true, and arithmetic on it stays its object (a
            value that says yes to every comparison no longer passes tolerance tests); in ``marft/CodeRepair-v0``,
            a tester's asserts run where neither program's text can be read, so a tester is paid for behaviour only.
"""

from marft_envs.tasks.code.chain import CodeRepairChain
from marft_envs.tasks.code.solo import CodeRepairSolo
from marft_envs.tasks.code.vote import CodeRepairVote

__all__ = ["CodeRepairChain", "CodeRepairSolo", "CodeRepairVote"]

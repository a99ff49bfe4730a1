"""Branching: copy an env mid-episode, so that a tree rollout can try several actions from one state.

Tree sampling over the round graph (siblings share their context) needs, at every agent node,
several envs in the same state. ``env.branch()`` (:meth:`marft_envs.core.FlexEnv.branch`) gives one:
an independent env in exactly the original's state — mid-round included (some agents of the round
acted, others not) — whose random generator is a copy of the original's. Given the same actions, a
branch and its original produce the same observations, rewards and infos, and the same draws of
``np_random`` from then on (next episodes included); acting on one never changes the other.

How a FlexEnv branches: a deep copy of its state, except the attributes its classes name in
``branch_shared`` (the names add up along the class hierarchy) — objects that are never changed in
place, such as a problem source, role prompts, the spaces or a frozen per-episode world, which a
branch shares with its original (a reset replaces them, never edits them). What is more than Python
objects copies itself its own way:

- the booking envs' SQLite database is copied with SQLite's backup API (``BookingDB.__deepcopy__``
  in :mod:`marft_envs.tasks.booking.db`), so each branch reads and writes a database of its own;
- the code-repair envs hold no sandbox state: their test runner and worker pool are process-wide,
  looked up from the env's limits (``CodeRepairTask.runner``), and the runner's cache holds reports
  that depend only on the program and the tests, so branches share it without seeing each other;
  only the episode (task, attempts, this round's answers) is copied.

An env that cannot be copied this way sets ``branchable = False`` (or overrides ``branch``).
:func:`require_branching` turns that, or an env with no ``branch`` method at all, into a one-line
:class:`NotBranchableError`, which a trainer raises before it starts a tree rollout; a ``branch()``
whose copy fails raises it too, naming the attribute that would not copy. :func:`probe_branching`
tries one ``branch()`` of a freshly reset env, so a ``branch()`` that raises, returns None or cannot
copy is refused before a run writes anything; :func:`checked_branch` is what a tree rollout calls,
naming ``branch()`` in one line when it fails later on.

This module imports nothing from :mod:`marft_envs.core` (the core calls it): it works on any object.
"""

from __future__ import annotations

import copy
from typing import Any

DOCS = "docs/contract.md#branching-tree-sampling"


class NotBranchableError(TypeError, ValueError):
    """The env cannot copy its state (no ``branch()``, ``branchable = False``, or state that does not copy).

    A ValueError too: a user's env to fix, which ``marft`` reports in one line (exit status 2).
    """


def require_branching(env: Any, purpose: str = "tree sampling") -> None:
    """Raise a one-line :class:`NotBranchableError` unless ``env`` can branch; ``purpose`` names what needs it."""
    name = _name(env)
    if not callable(getattr(env, "branch", None)):
        raise NotBranchableError(
            f"{purpose} needs an env that can copy its state mid-episode, but {name} has no branch() method: "
            f"subclass marft_envs.FlexEnv or add branch() (see {DOCS}), or turn {purpose} off"
        )
    if getattr(env, "branchable", True) is False:
        raise NotBranchableError(
            f"{purpose} needs an env that can copy its state mid-episode, but {name} declares branchable = False: "
            f"turn {purpose} off for it, or make its state copyable (see {DOCS})"
        )


def checked_branch(env: Any, purpose: str = "tree sampling") -> Any:
    """``env.branch()``, or a one-line :class:`NotBranchableError` naming ``branch()`` when it raises or returns no env."""
    try:
        copied = env.branch()
    except NotBranchableError as err:  # the generic copy's own line, naming the attribute
        raise err if str(err).startswith(purpose) else NotBranchableError(f"{purpose}: {err}") from None
    except Exception as err:  # the env's own code: name it, not a traceback from deep inside the rollout
        reason = f"{type(err).__name__}: {str(err).splitlines()[0][:160] if str(err).strip() else ''}".rstrip(": ")
        raise NotBranchableError(
            f"{purpose}: {type(env).__name__}.branch() failed ({reason}); fix branch() (see {DOCS}), or turn {purpose} off"
        ) from None
    if copied is None or copied is env or not callable(getattr(copied, "step", None)):
        what = "None" if copied is None else "the env itself" if copied is env else f"a {type(copied).__name__}"
        raise NotBranchableError(
            f"{purpose}: {type(env).__name__}.branch() returned {what}, not a copy of the env; "
            f"it must return an independent env in the same state (see {DOCS}), or turn {purpose} off"
        )
    return copied


def probe_branching(env: Any, purpose: str = "tree sampling", seed: int = 0) -> None:
    """Refuse (:class:`NotBranchableError`, one line) an env that cannot branch, before any work.

    :func:`require_branching`, then one :func:`checked_branch` of ``env`` reset with ``seed`` (the
    branch is closed at once; ``env`` is left reset).
    """
    require_branching(env, purpose)
    try:
        env.reset(seed=seed)
    except Exception as err:
        reason = f"{type(err).__name__}: {str(err).splitlines()[0][:160] if str(err).strip() else ''}".rstrip(": ")
        raise NotBranchableError(
            f"{purpose}: {type(env).__name__}.reset(seed={seed}) failed before branch() was tried ({reason})"
        ) from None
    copied = checked_branch(env, purpose)
    close = getattr(copied, "close", None)
    if callable(close):
        close()


def shared_attributes(env: Any) -> set[str]:
    """The attribute names that a branch of ``env`` shares: every ``branch_shared`` along its class hierarchy."""
    return {attr for klass in type(env).__mro__ for attr in vars(klass).get("branch_shared", ())}


def branch_copy(env: Any) -> Any:
    """A copy of ``env`` in the same state: deep, except the :func:`shared_attributes` (the generic ``branch``)."""
    require_branching(env)
    shared = shared_attributes(env)
    state = vars(env)
    memo: dict[int, Any] = {id(state[attr]): state[attr] for attr in shared if attr in state}
    try:
        return copy.deepcopy(env, memo)
    except Exception as err:  # say which attribute, rather than a traceback from deep inside copy
        attr, cause = _first_uncopyable(env, shared) or ("?", err)
        raise NotBranchableError(
            f"{_name(env)}.branch(): its attribute {attr!r} ({type(state.get(attr)).__name__}) cannot be copied "
            f"({type(cause).__name__}: {cause}); name it in branch_shared if it is read-only, override branch(), "
            "or set branchable = False"
        ) from err


def _first_uncopyable(env: Any, shared: set[str]) -> tuple[str, Exception] | None:
    # Only on the error path: copy attribute by attribute to find the culprit.
    for attr, value in vars(env).items():
        if attr in shared:
            continue
        try:
            copy.deepcopy(value)
        except Exception as err:
            return attr, err
    return None


def _name(env: Any) -> str:
    metadata = getattr(env, "metadata", None)
    name = metadata.get("name") if isinstance(metadata, dict) else None
    return f"{name} ({type(env).__name__})" if name and name != type(env).__name__ else type(env).__name__

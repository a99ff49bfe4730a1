"""The booking family: a coordinator, calendar, location and booking agents with tools over SQLite.

- ``marft/Booking-v0`` (:class:`Booking`): the coordinator's plan sets each round's graph.
- ``marft/BookingFixed-v0`` (:class:`BookingFixed`): calendar and location -> booking, every round.
- ``marft/BookingDecPOMDP-v0`` (:class:`BookingDecPOMDP`): no same-round dependencies.

The env classes are imported on first access (PEP 562), so that importing one of the family's plain
modules (``world``, ``db``, ...) does not import the envs and the grader
(:mod:`marft_envs.rewards.booking`, which imports nothing of this package).

Version history, one for the family's envs (each env's module docstring points here; when to add an id:
``docs/contract.md``, "Versioning"). Under each id, its changes, oldest first:
    ``marft/Booking-v0``, ``marft/BookingFixed-v0``, ``marft/BookingDecPOMDP-v0``:
        first release.
        additions under the same id (rewards unchanged): each round's infos carry ``shared_reward``
            (``marft_envs.outcomes.SHARED_REWARD``: the part of every agent's reward that all received alike,
            the team reward under ``credit="team"``), so the team's return counts it once, not once per agent.
"""

import importlib

_EXPORTS = {"Booking": "coordinated", "BookingDecPOMDP": "decpomdp", "BookingFixed": "fixed"}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

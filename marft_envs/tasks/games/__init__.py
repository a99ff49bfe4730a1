"""The games family: small competitive games between agents (zero-sum), for learners that train opponents.

Version history, one for the family's envs (each env's module docstring points here; when to add an id:
``docs/contract.md``, "Versioning"). Under each id, its changes, oldest first:
    ``marft/NumberDuel-v0``:
        first release (issue 50).
"""

from marft_envs.tasks.games.duel import NumberDuel

__all__ = ["NumberDuel"]

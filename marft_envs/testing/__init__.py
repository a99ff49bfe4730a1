"""The reward- and env-testing kit.

- :func:`check_env`: PettingZoo's and Gymnasium's checkers plus whole-episode determinism, pure
  queries, Dec-POMDP equivalence and branching (copies of an env mid-episode), on every view of an env.
- :class:`Case`, :func:`check_table`, :func:`cases`: table-driven reward-function tests.
- :mod:`marft_envs.testing.strategies`: hypothesis strategies for equivalent forms and near misses
  (imported on use; needs ``hypothesis``).
"""

from marft_envs.testing.checks import (
    CheckReport,
    check_branching,
    check_dec_pomdp_equivalence,
    check_determinism,
    check_env,
    check_pure_queries,
    random_policy,
)
from marft_envs.testing.tables import Case, cases, check_table, matches

__all__ = [
    "Case",
    "CheckReport",
    "cases",
    "check_branching",
    "check_dec_pomdp_equivalence",
    "check_determinism",
    "check_env",
    "check_pure_queries",
    "check_table",
    "matches",
    "random_policy",
]

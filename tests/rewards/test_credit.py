"""Credit assignment, table-driven with the project's own kit."""

import pytest

from marft_envs.rewards.credit import assign_credit
from marft_envs.testing import Case, cases, check_table

ORDER = ["reasoner_0", "actor_0"]
TABLE = [
    Case(("team", ORDER, 1.0), {"reasoner_0": 1.0, "actor_0": 1.0}, id="team-right"),
    Case(("team", ORDER, 0.5), {"reasoner_0": 0.5, "actor_0": 0.5}, id="team-half"),
    Case(("last", ORDER, 1.0), {"reasoner_0": 0.0, "actor_0": 1.0}, id="last-right"),
    Case(("last", ORDER, 0.0), {"reasoner_0": 0.0, "actor_0": 0.0}, id="last-wrong"),
    Case(("last", ["solo_0"], 1.0), {"solo_0": 1.0}, id="last-single"),
    Case(("per_agent", ORDER, 1.0, {"reasoner_0": 0.0, "actor_0": 1.0}), {"reasoner_0": 0.0, "actor_0": 1.0}, id="per-agent"),
    Case(("per_agent", ORDER, 1.0, {"actor_0": 1.0}), {"reasoner_0": 0.0, "actor_0": 1.0}, id="per-agent-missing"),
    Case(("team", [], 1.0), {}, id="no-agents"),
]


@cases(TABLE)
def test_credit_row(case):
    assert assign_credit(*case.args) == case.expected


def test_credit_table():
    check_table(assign_credit, TABLE)


def test_unknown_mode():
    with pytest.raises(ValueError, match="unknown credit mode 'all'"):
        assign_credit("all", ORDER, 1.0)

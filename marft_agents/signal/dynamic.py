"""Dynamic sampling (DAPO, arXiv 2503.14476): train only on groups whose rewards differ.

A group of ``G`` episodes that played one problem and all returned the same has advantage exactly 0
under GRPO: it costs a forward and backward pass and teaches nothing. With ``signal.dynamic_sampling``
the trainer drops such groups and plays fresh problems until the batch holds the asked number of
informative groups, or until it has made ``signal.max_draws`` collections; then it fills the rest of
the batch with the uninformative groups it drew first, so every update trains on the same number of
episodes (the learners' batch arithmetic stays as configured). A stop asked for meanwhile (SIGINT or
SIGTERM, ``marft_agents/training/interrupts.py``) ends the draws the same way, after the one playing:
the update trains on what was drawn, is checkpointed, and the run stops.

Fresh problems need fresh episode indices (the index picks the seed, hence the problem): draw ``d``
(0 = the ordinary collection) of update ``u`` uses ``[o + u E, o + (u + 1) E)`` with
``o = d * updates * E`` and ``E = episodes_per_update``, so no two draws of a run share an index and
every group still starts at a multiple of ``G``. Resumed runs draw the same indices.
"""

from __future__ import annotations

from collections.abc import Callable

from marft_agents.rollout.episode import Episode
from marft_agents.signal.diagnostics import group_has_spread, groups_of


def draw_indices(draw: int, update: int, episodes_per_update: int, updates: int) -> range:
    """The episode indices of collection ``draw`` of ``update`` (draw 0: the ordinary ones)."""
    first = draw * updates * episodes_per_update + update * episodes_per_update
    return range(first, first + episodes_per_update)


def pick_groups(spread: list[bool], wanted: int) -> tuple[list[int], int]:
    """Which groups make the batch: ``(indices into spread, how many of them are informative)``.

    ``spread`` says, for each drawn group in draw order, whether its returns differ (``group_has_spread``). The
    batch takes the first ``wanted`` groups whose returns differ, then, if there are too few, the first groups
    whose returns are all equal; the result is in draw order.
    """
    informative = [k for k, s in enumerate(spread) if s]
    kept = informative[:wanted]
    fill = [k for k, s in enumerate(spread) if not s][: wanted - len(kept)]
    return sorted(kept + fill), len(kept)


def collect_informative(
    collect: Callable[[range], list[Episode]],
    *,
    update: int,
    episodes_per_update: int,
    updates: int,
    group_size: int,
    max_draws: int,
    stopping: Callable[[], bool] = lambda: False,
) -> tuple[list[Episode], dict[str, float]]:
    """Collect until the batch holds ``episodes_per_update / group_size`` informative groups (or ``max_draws``).

    ``collect(indices)`` plays the episodes with those indices; once ``stopping()`` is true no further
    draw starts (the first always runs: it is the batch). Returns the batch, in draw order, and the
    ``signal/*`` metrics of the sampling: collections made, groups drawn, informative groups kept.
    """
    wanted = episodes_per_update // group_size
    drawn: list[list[Episode]] = []
    informative = 0
    draws = 0
    while draws < max_draws and informative < wanted and not (draws and stopping()):
        new = groups_of(collect(draw_indices(draws, update, episodes_per_update, updates)), group_size)
        drawn += new
        informative += sum(group_has_spread(g) for g in new)
        draws += 1
    picked, kept = pick_groups([group_has_spread(g) for g in drawn], wanted)
    batch = [e for k in picked for e in drawn[k]]
    return batch, {
        "signal/draws": float(draws),
        "signal/groups_drawn": float(len(drawn)),
        "signal/informative_groups": float(kept),
    }

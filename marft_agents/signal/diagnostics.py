"""Is there anything to learn from? The reward-signal diagnostics every run logs, and its warning.

A policy-gradient update learns from reward *differences*: GRPO standardises returns inside each
group of episodes that played one problem, so a group whose returns are all equal contributes exactly
nothing; a critic-based learner sees a batch whose rewards are all equal as pure value noise. With a
weak model most episodes score 0 (SmolLM2-135M solves ~4 % of its training episodes at T 0.7,
``docs/real-models.md``), so these are logged on every update, under ``signal/``:

- ``signal/rewarded_frac``: the share of the batch's episodes with some non-zero reward;
- ``signal/zero_spread_frac``: the share of groups (consecutive ``group_size`` episodes, one problem)
  whose episode returns are all equal — the team's, and each agent's own (in a zero-sum game the team's
  return is always 0 while each player's differ); for a learner without groups (``group_size`` 1) the batch is
  one group, so this is 1 exactly when every episode returned the same; for tree rollouts
  (``grpo.grouping=tree``: one episode per problem) the groups are the sibling groups and their scores;
- ``signal/<agent>/reward``: the mean reward of each agent's steps;
- ``signal/advantage_std`` (logged by the learner): the spread of the advantages before normalisation.

An update whose every group has zero spread has no signal; the trainer then prints
:func:`no_signal_warning` once, which names the ways to get one (``docs/real-models.md``, "When the
reward is zero") that the run does not already use.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from marft_agents.rollout.episode import Episode

RECIPE_DOC = 'docs/real-models.md, "When the reward is zero"'
"""Where the recipe is written down."""
REAL_MODEL = "smollm2-135m-instruct"
"""The named real model the warning suggests to a run on the embedded model."""


def episode_return(episode: Episode) -> float:
    """The team's return of an episode (:attr:`Episode.team_return`: a round's shared reward counted once)."""
    return episode.team_return


def groups_of(episodes: Sequence[Episode], group_size: int) -> list[list[Episode]]:
    """The batch's groups in order of first appearance: episodes with the same ``index // group_size``.

    ``group_size <= 1`` (no groups): the whole batch is one group.
    """
    if group_size <= 1:
        return [list(episodes)] if episodes else []
    groups: dict[int, list[Episode]] = defaultdict(list)
    for e in episodes:
        groups[e.index // group_size].append(e)
    return list(groups.values())


def has_spread(returns: Sequence[float]) -> bool:
    """Whether the returns differ (a group of fewer than two never does)."""
    return len(returns) > 1 and max(returns) != min(returns)


def own_returns(episode: Episode) -> dict[str, float]:
    """Each agent's own return in an episode: the rewards paid to it."""
    out: dict[str, float] = defaultdict(float)
    for s in episode.steps:
        out[s.agent] += s.reward
    return dict(out)


def group_has_spread(group: Sequence[Episode]) -> bool:
    """Whether a group's episodes differ in the team's return or in some agent's own return."""
    if has_spread([episode_return(e) for e in group]):
        return True
    own = [own_returns(e) for e in group]
    agents = {a for o in own for a in o}
    return any(has_spread([o.get(a, 0.0) for o in own]) for a in agents)


def signal_metrics(episodes: Sequence[Episode], group_size: int) -> dict[str, float]:
    """The ``signal/*`` diagnostics of one batch (see the module docstring); empty for an empty batch."""
    if not episodes:
        return {}
    if any(e.branches for e in episodes):  # tree rollouts: what is compared is each sibling group's scores
        siblings: dict[tuple, list[float]] = defaultdict(list)
        for e in episodes:
            for s in (*e.steps, *e.branches):
                siblings[s.group].append(s.score)
        flat = [not has_spread(g) for g in siblings.values()]
    else:
        flat = [not group_has_spread(g) for g in groups_of(episodes, group_size)]
    out = {
        "signal/rewarded_frac": sum(any(s.reward != 0 for s in e.steps) for e in episodes) / len(episodes),
        "signal/zero_spread_frac": sum(flat) / len(flat),
    }
    rewards: dict[str, list[float]] = defaultdict(list)
    for e in episodes:
        for s in e.steps:
            rewards[s.agent].append(s.reward)
    for agent, values in rewards.items():
        out[f"signal/{agent}/reward"] = sum(values) / len(values)
    return out


def no_signal(metrics: dict[str, float]) -> bool:
    """Whether an update's metrics say every group had zero spread (nothing to learn from)."""
    return metrics.get("signal/zero_spread_frac", 0.0) >= 1.0


def options_to_try(
    *,
    model: str,
    env_kwargs: dict,
    dynamic_sampling: bool,
    curriculum: bool,
    init_from: str | None,
    grouped: bool,
    has_difficulties: bool,
    has_format_reward: bool,
) -> list[str]:
    """The recipe's options, in the order to try them, less those the run already uses or cannot use."""
    out = []
    if has_format_reward and not env_kwargs.get("format_reward"):
        out.append("env_kwargs.format_reward=0.1 (a gold-free bonus for a parsable \\boxed{} answer)")
    if has_difficulties and not curriculum:
        out.append("signal.curriculum=true (draw the levels the team sometimes solves)")
    if grouped and not dynamic_sampling:
        out.append("signal.dynamic_sampling=true (replace all-equal groups with fresh problems)")
    if not grouped:
        out.append("algo=grpo with signal.dynamic_sampling=true")
    if init_from is None:
        out.append("init_from=RUN_DIR (start from an earlier run's adapters, e.g. a format warm start)")
    if model == "embedded":
        out.append(f"model={REAL_MODEL} (the embedded model knows only arithmetic prompts)")
    return out


def no_signal_warning(update: int, metrics: dict[str, float], options: list[str]) -> str:
    """One line: update ``update`` had no reward signal, and what to try (``options``)."""
    rewarded = metrics.get("signal/rewarded_frac", 0.0)
    what = (
        "every reward was exactly 0"
        if rewarded == 0
        else f"{rewarded:.0%} of its episodes were rewarded, but every group's returns were equal"
    )
    todo = "; ".join(options) if options else "every option of the recipe is already in use"
    skipped = metrics.get("policy/skipped_equal_returns")
    if skipped is None:  # a group-relative learner: zero advantages, the entropy and KL terms alone moved it
        effect = "so every advantage was 0"
    elif skipped:
        effect = "so no policy step was taken (the critic still fit)"
    elif rewarded == 0:  # every return was 0, so only skip_equal_returns=false lets the learner step
        effect = "yet the policy took a step on the critic's advantages (skip_equal_returns=false)"
    else:
        effect = "but its returns differed, so the policy took a step on the critic's advantages"
    return (
        f"warning: update {update} had no reward signal ({what}), {effect}; try, in this order: {todo} ({RECIPE_DOC})"
    )


def summary_of(rows: Sequence[dict[str, float]]) -> dict[str, float]:
    """Means over a run's updates of the batch-level ``signal/*`` metrics, and how many updates had no signal."""
    if not rows:
        return {}
    keys = ("signal/rewarded_frac", "signal/zero_spread_frac", "signal/advantage_std")
    out = {
        k.split("/", 1)[1]: sum(r[k] for r in rows if k in r) / max(sum(k in r for r in rows), 1)
        for k in keys
        if any(k in r for r in rows)
    }
    out["updates_without_signal"] = sum(no_signal(r) for r in rows)
    out["updates"] = len(rows)
    return out

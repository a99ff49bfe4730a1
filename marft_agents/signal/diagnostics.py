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
- ``signal/<agent>/rewarded_frac``: the share of each agent's steps with a positive reward (its own reward rate);
- ``signal/<agent>/truncated_frac``: the share of each agent's responses cut at its token limit
  (:class:`TokenLimit`: the run's ``max_new_tokens`` or ``agents.<agent_id>.max_new_tokens``) without an
  end-of-turn token, where the trainer passes the limits; a response that ends exactly at the limit with the end
  token finished, and a skipped step (nothing generated) is not a response;
- ``signal/advantage_std`` (logged by the learner): the spread of the advantages before normalisation.

An update whose every group has zero spread has no signal; the trainer then prints
:func:`no_signal_warning` once, which names the ways to get one (``docs/real-models.md``, "When the
reward is zero") that the run does not already use, and, where one stands out, the agent to look at first
(:func:`agent_to_look_at`: one whose own score is 0 while a teammate's is not, or one whose responses are
mostly cut at its token limit).

Only the chosen path counts (``Episode.steps``): a tree rollout's branches are left out, as in ``reward``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from marft_agents.rollout.episode import AgentStep, Episode

RECIPE_DOC = 'docs/real-models.md, "When the reward is zero"'
"""Where the recipe is written down."""
REAL_MODEL = "smollm2-135m-instruct"
"""The named real model the warning suggests to a run on the embedded model."""
MOSTLY_CUT = 0.5
"""An agent with at least this share of its responses cut at its token limit is named by the warnings."""


@dataclass(frozen=True)
class TokenLimit:
    """An agent's token limit and end-of-turn token: what tells a response cut at the limit from one that ended."""

    max_new_tokens: int
    """The agent's longest response (the run's ``max_new_tokens``, or ``agents.<agent_id>.max_new_tokens``)."""
    end_token: int | None
    """The id of its model's end-of-turn token; None: unknown, and a response at the limit counts as cut."""


def cut_at_limit(response: Sequence[int], limit: TokenLimit) -> bool:
    """Whether a response stopped at the token limit rather than ending: as long as the limit, its last token
    not the end-of-turn token."""
    return len(response) >= limit.max_new_tokens and (limit.end_token is None or response[-1] != limit.end_token)


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


def signal_metrics(
    episodes: Sequence[Episode], group_size: int, limits: Mapping[str, TokenLimit] | None = None
) -> dict[str, float]:
    """The ``signal/*`` diagnostics of one batch (see the module docstring); empty for an empty batch.

    ``limits``: each agent's token limit (agent id -> :class:`TokenLimit`); ``truncated_frac`` only for those in it.
    """
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
    steps: dict[str, list[AgentStep]] = defaultdict(list)
    for e in episodes:
        for s in e.steps:
            steps[s.agent].append(s)
    for agent, own in steps.items():
        out.update(agent_metrics(agent, own, (limits or {}).get(agent)))
    return out


def agent_metrics(agent: str, steps: Sequence[AgentStep], limit: TokenLimit | None) -> dict[str, float]:
    """One agent's ``signal/<agent>/*``: its mean reward, its share of positive rewards, and (with its ``limit``)
    the share of its responses cut at the limit."""
    out = {
        f"signal/{agent}/reward": sum(s.reward for s in steps) / len(steps),
        f"signal/{agent}/rewarded_frac": sum(s.reward > 0 for s in steps) / len(steps),
    }
    responses = [s.response for s in steps if not s.skipped]  # a skipped step generated nothing
    if limit is not None and responses:
        out[f"signal/{agent}/truncated_frac"] = sum(cut_at_limit(r, limit) for r in responses) / len(responses)
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


def agent_to_look_at(metrics: Mapping[str, float], limits: Mapping[str, TokenLimit]) -> str | None:
    """A clause naming the agent to look at first, from an update's metrics (or their :func:`means` over several);
    None when no agent stands out.

    It is an agent whose own score is 0 while a teammate's is not (of several, the one most cut at its token
    limit), else the agent most cut at its limit if at least :data:`MOSTLY_CUT` of its responses were. The own
    score is the agent's first-round ``reward_components.own_correct`` (``train/<agent>/own_accuracy``) where the
    env reports one, else its share of positive rewards (``signal/<agent>/rewarded_frac``).
    """
    keys = [k.split("/") for k in metrics if k.startswith("signal/") and k.endswith("/rewarded_frac")]
    agents = [k[1] for k in keys if len(k) == 3]  # signal/<agent>/rewarded_frac, not the batch's
    score = {a: metrics.get(f"train/{a}/own_accuracy", metrics[f"signal/{a}/rewarded_frac"]) for a in agents}
    cut = {a: metrics.get(f"signal/{a}/truncated_frac", 0.0) for a in agents}
    best = max(agents, key=lambda a: score[a], default=None)  # the best-scoring teammate, for contrast
    candidates = [a for a in agents if score[a] == 0] if best is not None and score[best] > 0 else []
    if not candidates:
        candidates = [a for a in agents if cut[a] >= MOSTLY_CUT]
    if not candidates:
        return None
    agent = max(candidates, key=lambda a: cut[a])  # the first of equals: the agents' acting order
    what = "own_correct" if f"train/{agent}/own_accuracy" in metrics else "rewarded steps"
    parts = [f"own score ({what}) {score[agent]:.0%}"]
    if score[agent] == 0 and score[best] > 0:
        parts[0] += f" while {best}'s is {score[best]:.0%}"
    if f"signal/{agent}/truncated_frac" in metrics:
        at = f"max_new_tokens={limits[agent].max_new_tokens}" if agent in limits else "its max_new_tokens"
        parts.append(f"{cut[agent]:.0%} of its responses cut at {at}")
        if cut[agent] >= MOSTLY_CUT:
            parts.append(f"raise agents.{agent}.max_new_tokens")
    return f"look at agent {agent} first ({'; '.join(parts)})"


def means(rows: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Each key's mean over the rows that hold it (several updates' metrics, for :func:`agent_to_look_at`)."""
    values: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        for k, v in row.items():
            values[k].append(v)
    return {k: sum(v) / len(v) for k, v in values.items()}


def no_signal_warning(update: int, metrics: dict[str, float], options: list[str], look_at: str | None = None) -> str:
    """One line: update ``update`` had no reward signal, the agent to look at first (``look_at``, from
    :func:`agent_to_look_at`) where one stands out, and what to try (``options``)."""
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
    # the agent first: where one narrow agent holds the team back, a bigger model or more sampling will not help
    todo = f"{look_at}; try, in this order: {todo}" if look_at else f"try, in this order: {todo}"
    return f"warning: update {update} had no reward signal ({what}), {effect}; {todo} ({RECIPE_DOC})"


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

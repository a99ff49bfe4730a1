"""Held-out evaluation of a LaMAS: greedy single-pass accuracy and per-role diagnostics.

The headline number is the team's single-pass accuracy with greedy decoding on held-out problems
(the designated answering agent's final answer). MARFT's own curves use a different protocol —
"solved within K attempts with right/wrong feedback" — which :func:`evaluate` reports separately,
under that name, when ``rounds > 1``.

How the env is built is declared in its registry entry (:class:`marft_envs.registration.EnvEntry`),
never guessed: ``eval_kwargs`` (a held-out split, e.g. ``{"split": "test"}``; the episodes' reset
options come from ``env.heldout_options(n, seed)``) and ``attempts_option`` (the constructor option
that sets the attempts with feedback). An env that declares no held-out split is evaluated as
configured, and one without an attempts option in its own episode protocol; the result says which
(``heldout``, ``protocol``, ``attempts``).

Per-role diagnostics show whether the system still uses its messages: each agent's own accuracy
(``info["reward_components"]["own_correct"]``), and the answering agent's accuracy when each other
agent was right vs wrong (a downstream agent can learn to answer well without reading its parent,
which shows as the same accuracy whether the parent was right or wrong). Each agent's mean response
length shows how much it writes (RL often changes that first). Where the env reports each agent's
answer (``info["answer"]``, the MATH envs), each agent's ``copy_rate`` (how often its answer is one
of the teammates' it saw in the same round: MathChain's actor copying the reasoner) and the team's
``agreement`` (how often every answer of an episode's last round is the same: MathDebate's solvers
converging) show whether the agents think for themselves.

Evaluation is greedy by default; ``eval.temperature`` (with ``eval.top_k`` and ``eval.top_p``:
:class:`~marft_agents.engines.config.EvalSampling`) makes it sample, every agent alike, from draws seeded by
``eval.seed`` alone (:func:`seeded_draws`), so a mid-run evaluation leaves the training's random numbers as they were.
An agent's own token limit and stop strings (``agents.<agent_id>.max_new_tokens`` / ``.stop``) hold here as in
training; its own temperature, top-k and top-p do not (evaluation has its own: :func:`eval_sampling`).

:mod:`marft_agents.rollout.majority` is the other protocol on the same problems: self-consistency, the plurality
answer of k sampled answers per problem, k matched to a token budget such as a team's ``mean_tokens``.
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

import marft_envs
from marft_agents.engines.base import Engine
from marft_agents.engines.config import EvalSampling
from marft_agents.engines.seeded import episode_seed
from marft_agents.models.policy import LaMASPolicy
from marft_agents.models.sampling import Sampling, agent_sampling
from marft_agents.rollout.episode import AgentStep, Episode
from marft_agents.rollout.layered import RolloutEngine
from marft_envs.outcomes import ANSWER, OWN_CORRECT, REWARD_COMPONENTS, TEAM_ANSWER

HELDOUT_SEED = 20_251_130  # fixed: every run evaluates on the same held-out problems
PROTOCOLS = ("single_pass", "attempts_with_feedback", "as_configured")
"""``single_pass``: the attempts option set to 1; ``attempts_with_feedback``: set to ``rounds > 1``;
``as_configured``: the env has no attempts option and runs its episodes as ``env_kwargs`` say."""


HEADLINE_METRICS = ("accuracy", "mean_return")
"""What an env may declare as its headline (``FlexEnv.headline_metric``)."""
EVAL_SPLITS = ("test", "validation")
"""What an evaluation plays (``eval_split``): the held-out split the env declares (``test``), or, for an env whose
declared held-out options set ``split``, that option set to ``validation`` (the MATH family's -v1 ids,
MathJigsaw-v2)."""
OUTCOMES = "outcomes"
"""The result key of an evaluation's per-problem outcomes (:func:`problem_outcomes`; a run writes them to
``outcomes/``, ``runs/report.py``)."""


def eval_sampling(
    sampling: EvalSampling | None,
    max_new_tokens: int,
    agent_max_new_tokens: Mapping[str, int] | None = None,
    stop: Sequence[str] = (),
    agent_stop: Mapping[str, Sequence[str]] | None = None,
) -> tuple[Sampling, dict[str, Sampling]]:
    """The evaluation's :class:`Sampling` for every agent (``sampling``'s; None: greedy), and each agent's own where its
    token limit or stop strings differ. Greedy keeps no top-k or top-p: it draws nothing."""
    s = sampling or EvalSampling()
    greedy = s.temperature == 0
    run = Sampling(s.temperature, max_new_tokens, 0 if greedy else s.top_k, 1.0 if greedy else s.top_p, tuple(stop))
    return run, agent_sampling(run, max_new_tokens=agent_max_new_tokens, stop=agent_stop)


@contextlib.contextmanager
def seeded_draws(engine: Engine, device: torch.device, seed: int, episodes: Iterable[int]) -> Iterator[None]:
    """A sampled evaluation's draws from ``seed`` alone: each episode's from its own generator where the engine has
    them (the episode-seeded engine: the rollout workers' draws too), else from torch's generators seeded here and
    restored after, so a mid-run evaluation leaves the training's random numbers as they were."""
    if hasattr(engine, "seed_episodes"):
        engine.seed_episodes(eval_seeds(seed, episodes))  # training seeds its episodes again before each collection
        yield
        return
    device = torch.device(device)
    cuda = [device.index if device.index is not None else torch.cuda.current_device()] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=cuda):
        torch.manual_seed(seed)
        yield


def decoding_of(sampling: Sampling) -> str:
    """How an evaluation drew its actions, as its result and the report name it: ``greedy``, or ``sampled at T=0.7,
    top-p 0.9``."""
    if sampling.temperature == 0:
        return "greedy"
    knobs = [f"T={sampling.temperature:g}"]
    knobs += [f"top-k {sampling.top_k}"] if sampling.top_k else []
    knobs += [f"top-p {sampling.top_p:g}"] if sampling.top_p < 1.0 else []
    return f"sampled at {', '.join(knobs)}"


def eval_seeds(seed: int, episodes: Iterable[int]) -> dict[int, int]:
    """Each evaluation episode's sampling seed: apart from every training episode's (``HELDOUT_SEED`` stands where
    training puts its update)."""
    return {i: episode_seed(seed, HELDOUT_SEED, i) for i in episodes}


@dataclass(frozen=True)
class EvalPlan:
    """How one evaluation builds its envs, read from the env's registry entry."""

    env_kwargs: dict[str, Any]
    """The constructor options of the evaluation envs."""
    heldout: bool
    """True when the env declares a held-out split (its episodes come from ``heldout_options``)."""
    protocol: str
    """One of :data:`PROTOCOLS`."""
    attempts: int | None
    """Attempts per episode, or None when the protocol is ``as_configured``."""
    headline_metric: str = "accuracy"
    """What the run reports first: the env class's ``headline_metric`` ("accuracy" or "mean_return")."""

    @property
    def split(self) -> str | None:
        """The held-out split played (the env's ``split`` option: ``test`` or ``validation``); None without one."""
        return self.env_kwargs.get("split") if self.heldout else None


def eval_plan(env_id: str, env_kwargs: dict, rounds: int = 1, split: str = "test") -> EvalPlan:
    """The evaluation envs' options and protocol for ``env_id``; ``rounds > 1`` needs an attempts option, ``split``
    other than ``test`` an env whose held-out options set ``split`` (:data:`EVAL_SPLITS`)."""
    entry = marft_envs.spec(env_id)
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"rounds must be an integer of at least 1, got {rounds!r}")
    kwargs = {**env_kwargs, **held_out_kwargs(env_id, entry.eval_kwargs, split)}
    metric = getattr(entry.factory, "headline_metric", "accuracy")
    if metric not in HEADLINE_METRICS:
        raise ValueError(f"{env_id}: headline_metric must be one of {list(HEADLINE_METRICS)}, got {metric!r}")
    if entry.attempts_option is None:
        if rounds > 1:
            raise ValueError(f"{env_id} has no attempts-with-feedback option: evaluate it with rounds=1")
        return EvalPlan(kwargs, entry.eval_kwargs is not None, "as_configured", None, metric)
    kwargs.pop("max_cycles", None)  # PettingZoo's name for the same limit would override the attempts
    kwargs[entry.attempts_option] = rounds
    protocol = "single_pass" if rounds == 1 else "attempts_with_feedback"
    return EvalPlan(kwargs, entry.eval_kwargs is not None, protocol, rounds, metric)


def held_out_kwargs(env_id: str, declared: dict | None, split: str = "test") -> dict:
    """The env options that make ``env_id`` play its held-out split: those it declares (``test``), with ``split``
    set to ``validation`` instead when asked; a ValueError in one line for an env that declares no ``split``."""
    if split not in EVAL_SPLITS:
        raise ValueError(f"eval_split must be one of {list(EVAL_SPLITS)}, got {split!r}")
    if split == "test":
        return dict(declared or {})
    if "split" not in (declared or {}):
        raise ValueError(
            f"eval_split={split}: {env_id} declares no held-out split option to set (its evaluation plays "
            f"{'its seeds as configured' if declared is None else declared}); use eval_split=test"
        )
    return {**declared, "split": split}


def evaluate(
    policy: LaMASPolicy,
    env_id: str,
    env_kwargs: dict,
    n: int,
    *,
    rounds: int = 1,
    max_new_tokens: int = 48,
    n_envs: int = 128,
    samples: int = 0,
    engine: Engine | None = None,
    agent_max_new_tokens: Mapping[str, int] | None = None,
    sampling: EvalSampling | None = None,
    stop: Sequence[str] = (),
    agent_stop: Mapping[str, Sequence[str]] | None = None,
    split: str = "test",
    outcomes: bool = False,
) -> dict:
    """Evaluation on ``n`` held-out problems, greedy unless ``sampling`` samples; ``rounds > 1`` uses the feedback
    protocol; ``split="validation"`` plays the validation split instead of test (:func:`held_out_kwargs`).

    ``agent_max_new_tokens`` / ``agent_stop``: the agents with a token limit or stop strings of their own (the
    others: ``max_new_tokens`` / ``stop``).

    Returns :func:`summarize`'s keys plus ``heldout`` (bool), ``protocol`` (one of :data:`PROTOCOLS`)
    and ``attempts`` (int, or None for ``as_configured``); with ``samples > 0`` also ``samples``, the
    transcripts of that many episodes; with ``outcomes`` also ``outcomes``, one line per problem
    (:func:`problem_outcomes`). ``engine`` generates (default: the hf engine on ``policy``).
    """
    plan = eval_plan(env_id, env_kwargs, rounds, split)
    envs = [marft_envs.make(env_id, **plan.env_kwargs) for _ in range(min(n, n_envs))]
    options = episode_options(plan, envs[0], n)
    run, own = eval_sampling(sampling, max_new_tokens, agent_max_new_tokens, stop, agent_stop)
    rollout = RolloutEngine(policy, run, engine=engine, agent_sampling=own)
    draws = contextlib.nullcontext()
    if run.temperature > 0:
        draws = seeded_draws(rollout.engine, policy.device, sampling.seed, range(len(options)))
    with draws:
        episodes = rollout.collect(
            envs, range(len(options)), seed_of=lambda i: HELDOUT_SEED + i, options_of=options.__getitem__
        )
    return eval_result(episodes, plan, samples, decoding_of(run), options if outcomes else None)


def episode_options(plan: EvalPlan, env: Any, n: int) -> list[dict | None]:
    """The reset options of each of ``n`` evaluation episodes (fewer when the held-out split is smaller).

    Episode ``i`` is reset with seed ``HELDOUT_SEED + i`` and these options (None without a held-out split).
    """
    return list(env.heldout_options(n, HELDOUT_SEED)) if plan.heldout else [None] * n


def eval_result(
    episodes: list[Episode],
    plan: EvalPlan,
    samples: int = 0,
    decoding: str = "greedy",
    options: Sequence[dict | None] | None = None,
) -> dict:
    """:func:`evaluate`'s result for the finished evaluation ``episodes`` (in index order) under ``plan``, drawn as
    ``decoding`` says (:func:`decoding_of`); given the episodes' reset ``options``, with their per-problem outcomes."""
    out = {
        **summarize(episodes),
        "heldout": plan.heldout,
        "protocol": plan.protocol,
        "attempts": plan.attempts,
        "headline_metric": plan.headline_metric,
        "decoding": decoding,
        "split": plan.split,
    }
    if options is not None:  # one line per problem, for the run folder
        out[OUTCOMES] = problem_outcomes(episodes, options)
    if samples:  # whole transcripts, for the run folder
        out["samples"] = [transcript(e) for e in pick_transcripts(episodes, samples)]
    return out


def problem_outcomes(episodes: list[Episode], options: Sequence[dict | None]) -> list[dict]:
    """One plain-data line per evaluation episode, in index order: the problem (``uid``, gold ``answer``: None where
    the episode's reset options hold none), the team's answer and whether it was right, and each agent's.

    ``episode`` and ``seed`` (``HELDOUT_SEED + episode``) say which episode it was; ``correct`` is the env's success
    (``SOLVED``; None when it reports none), ``team_answer`` what the env reports as the team's final answer
    (``TEAM_ANSWER``), ``return`` the team's return. ``agents``: each agent's last step's ``answer`` and
    ``own_correct``, where the env reports them.
    """
    out = []
    for e in episodes:
        problem = (options[e.index] or {}).get("problem") if e.index < len(options) else None
        final = e.steps[-1].info if e.steps else {}
        out.append(
            {
                "episode": e.index,
                "seed": HELDOUT_SEED + e.index,
                "uid": problem_id(problem),
                "answer": _plain(getattr(problem, "answer", None)),
                "team_answer": _plain(final.get(TEAM_ANSWER)),
                "correct": e.solved,
                "return": e.team_return,
                "rounds": 1 + e.steps[-1].round if e.steps else 0,
                "agents": {s.agent: agent_outcome(s) for s in e.steps},  # later steps replace earlier: the last round's
            }
        )
    return out


def problem_id(problem: Any) -> str | None:
    """A problem's stable id: its ``uid`` (MATH), ``task_id`` (code repair) or ``id``; None without one."""
    for attr in ("uid", "task_id", "id"):
        value = getattr(problem, attr, None)
        if value not in (None, ""):
            return str(value)
    return None


def agent_outcome(step: AgentStep) -> dict:
    """An agent-step's reported ``answer`` and ``own_correct``, those the env reports."""
    out = {}
    if ANSWER in step.info:
        out["answer"] = _plain(step.info[ANSWER])
    own = step.info.get(REWARD_COMPONENTS, {}).get(OWN_CORRECT)
    if own is not None:
        out["own_correct"] = float(own)
    return out


def _plain(value: Any) -> Any:
    """``value`` as JSON can hold it: None, a bool, a number or a string (anything else as its text)."""
    return value if value is None or isinstance(value, (bool, int, float, str)) else str(value)


def transcript(episode: Episode) -> dict:
    """One episode as plain data: every agent-step's observation, action and reward, and the outcome."""
    return {
        "episode": episode.index,
        "solved": episode.solved,
        "return": episode.team_return,
        "steps": [
            {
                "round": s.round,
                "agent": s.agent,
                "observation": s.observation,
                "action": s.text,
                "reward": s.reward,
                "reward_components": s.info.get(REWARD_COMPONENTS, {}),
            }
            for s in episode.steps
        ],
    }


def training_transcript(episode: Episode, decode: Callable[[str, list[int]], str]) -> dict:
    """:func:`transcript` plus what a training update read of each agent-step: ``prompt`` and ``response``, its exact
    token ids as ``decode(agent, ids)`` gives them, and ``return_to_go``, the team's reward from that step on
    (undiscounted, a round's shared reward once: ``AgentStep.chain_reward``), what chain credit sums."""
    out = transcript(episode)
    to_go = 0.0
    for row, s in zip(reversed(out["steps"]), reversed(episode.steps)):  # a sum from the end: no running difference
        to_go += s.chain_reward
        row.update(prompt=decode(s.agent, s.prompt), response=decode(s.agent, s.response), return_to_go=to_go)
    return out


def pick_transcripts(episodes: list[Episode], n: int) -> list[Episode]:
    """``n`` episodes to keep whole: half rewarded (non-zero return) and half not, where both exist, in index order.

    The first rewarded and the first unrewarded ones (the draw is the held-out split's, not chosen by
    outcome); when one kind runs short the other fills the rest.
    """
    rewarded = [e for e in episodes if any(s.reward != 0 for s in e.steps)]
    unrewarded = [e for e in episodes if not any(s.reward != 0 for s in e.steps)]
    take = min(len(rewarded), max(n - len(unrewarded), (n + 1) // 2))
    chosen = rewarded[:take] + unrewarded[: n - take]
    return sorted(chosen, key=lambda e: e.index)


def summarize(episodes: list[Episode]) -> dict:
    """Accuracy, mean return (each with its standard error), the mean generated tokens per episode (``mean_tokens``:
    every agent, every round) and per-role diagnostics of finished episodes.

    ``success_reported`` says whether the env reported success at all (``marft_envs.outcomes.SOLVED``);
    when it did not, ``accuracy`` is 0 by definition and mean return is the number to read.
    """
    solved = np.array([bool(e.solved) for e in episodes], dtype=float)
    returns = np.array([e.team_return for e in episodes], dtype=float)  # a shared reward once, not once per agent
    out = {
        "episodes": len(episodes),
        "success_reported": any(e.solved is not None for e in episodes),
        "accuracy": float(solved.mean()) if len(solved) else 0.0,
        "accuracy_stderr": _stderr(solved),
        "mean_return": float(returns.mean()) if len(returns) else 0.0,
        "mean_return_stderr": _stderr(returns),
        "mean_rounds": float(np.mean([1 + e.steps[-1].round for e in episodes])) if episodes else 0.0,
        "mean_tokens": float(np.mean([episode_tokens(e) for e in episodes])) if episodes else 0.0,
    }
    out["roles"] = role_diagnostics(episodes)
    agreement = answer_agreement(episodes)
    if agreement is not None:
        out["agreement"] = agreement
    return out


def episode_tokens(episode: Episode) -> int:
    """The tokens an episode generated: every agent-step's response, every round (the end-of-turn token included)."""
    return sum(len(s.response) for s in episode.steps)


def _stderr(x: np.ndarray) -> float:
    return float(x.std(ddof=1) / np.sqrt(len(x))) if len(x) > 1 else 0.0


def role_diagnostics(episodes: list[Episode]) -> dict:
    """Per agent: first-round own accuracy, the answering agent's first-round accuracy given this agent
    right or wrong, and the mean response length in tokens over all its responses (every round; the
    end-of-turn token included)."""
    own: dict[str, list[float]] = defaultdict(list)
    lengths: dict[str, list[int]] = defaultdict(list)
    given: dict[str, dict[str, list[float]]] = defaultdict(lambda: {"right": [], "wrong": []})
    for e in episodes:
        for s in e.steps:
            lengths[s.agent].append(len(s.response))
        first = [s for s in e.steps if s.round == 0]
        if not first:
            continue
        correct = {s.agent: s.info.get(REWARD_COMPONENTS, {}).get(OWN_CORRECT) for s in first}
        for agent, c in correct.items():
            if c is not None:
                own[agent].append(float(c))
        answerer = first[-1].agent
        for agent, c in correct.items():
            if agent != answerer and c is not None and correct.get(answerer) is not None:
                given[agent]["right" if c else "wrong"].append(float(correct[answerer]))
    roles: dict[str, dict] = {a: {"mean_response_tokens": float(np.mean(v))} for a, v in lengths.items()}
    for agent, v in own.items():
        roles[agent]["own_accuracy"] = float(np.mean(v))
    for agent, split in given.items():
        for k, v in split.items():
            roles[agent][f"answer_accuracy_when_{k}"] = float(np.mean(v)) if v else None
            roles[agent][f"n_{k}"] = len(v)
    for agent, rate in copy_rates(episodes).items():
        roles[agent]["copy_rate"] = rate
    return roles


def same_answer(a: object, b: object) -> bool:
    """Whether two reported answers are the same: equal, or equivalent as math answers; no answer (None) matches
    none."""
    if a is None or b is None:
        return False
    if a == b:
        return True
    from marft_envs.rewards.math import answers_match

    return isinstance(a, str) and isinstance(b, str) and answers_match(a, b)


def copy_rates(episodes: list[Episode]) -> dict[str, float]:
    """Per agent that saw teammates' answers: the share of its steps whose answer is one of theirs.

    A step counts when the env reports answers (``info["answer"]``) and at least one of the step's
    parents (the agents whose same-round actions it saw) gave one; an agent that gives no answer
    there did not copy. MathChain's actor: how often its boxed answer is the reasoner's.
    """
    copied: dict[str, list[float]] = defaultdict(list)
    for e in episodes:
        answers = {(s.round, s.agent): s.info[ANSWER] for s in e.steps if ANSWER in s.info}
        for s in e.steps:
            if ANSWER not in s.info:
                continue
            seen = [answers[(s.round, p)] for p in s.parents if answers.get((s.round, p)) is not None]
            if seen:
                copied[s.agent].append(float(any(same_answer(s.info[ANSWER], a) for a in seen)))
    return {agent: float(np.mean(v)) for agent, v in copied.items()}


def answer_agreement(episodes: list[Episode]) -> float | None:
    """The share of episodes whose last round's answers (two or more reported) are all the same; None without any.

    An agent that gave no answer disagrees. MathDebate's solvers: how often they end on one answer.
    """
    agreed = []
    for e in episodes:
        last = [s.info[ANSWER] for s in e.steps if s.round == e.steps[-1].round and ANSWER in s.info]
        if len(last) >= 2:
            agreed.append(float(all(same_answer(last[0], a) for a in last[1:])))
    return float(np.mean(agreed)) if agreed else None

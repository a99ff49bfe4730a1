"""Train on marft envs with TRL's ``GRPOTrainer`` (trl==1.16.0): a ``rollout_func`` and reward functions.

**Multi-agent, any round graph: ``MarftRollout``.** ``GRPOTrainer`` asks a ``rollout_func(prompts,
trainer)`` for exactly one row (prompt ids, completion ids, log-probs) per prompt it passes, and
groups ``num_generations`` consecutive rows for its group-relative advantage. So each dataset row
here names one *agent-step*: ``{"seed": s, "agent": a, "round": r}`` as JSON in the ``prompt``
column (:func:`agent_step_dataset` builds them). For the batch it is given, the rollout plays, per
seed, as many episodes as that seed's slots are repeated (the G copies: one episode each), all the
envs together through the layered view (``ready_agents()`` → ``observe`` → one batched ``generate``
with the trainer's model → ``step``), and returns for each row that agent's prompt, completion and
log-probs at that round of its episode. A group is then G samples of the same agent at the same
round of the same problem. Its reward is the agent's return from that round on (the sum of its
rewards in rounds ``>= r``), passed as the extra key ``marft_reward``, which :func:`env_reward`, the
reward function to give the trainer, returns as is. A slot whose episode ended before its round
(or whose agent had finished) gets one masked token (``env_mask`` 0) and reward None, which TRL
leaves out of the group's baseline and gives no advantage.

With ``GRPOConfig(shuffle_dataset=False)`` and a generation batch that holds whole seeds (a
multiple of ``agents x rounds x num_generations`` rows), every episode played is used for all its
agent-steps; with shuffling, slots of one seed may land in different batches and their episodes are
played again (correct, but more generation).

Generation goes through the engine interface like every other sampler here: a
:class:`~marft_agents.engines.trl.TRLEngine` over the trainer's model, from the prompts the policies
build too (:func:`marft_agents.models.chat.prompt_ids`: the chat template, or plain text without one). Log-probs are the
sampling distribution's (``output_scores`` of ``generate`` with the trainer's own ``generation_config``:
temperature, top-k/top-p after scaling), as TRL's importance-sampling correction expects.

**One agent: a reward function.** :func:`solo_reward` grades completions with a one-agent marft env
(e.g. ``marft/MathSolo-v0``) reset with each row's ``seed``: TRL generates as usual, from the prompts
of :func:`solo_dataset`, and the env's first-round reward is the reward.

Nothing here is imported by ``import marft_envs``; it needs ``pip install 'marft[adapters]'``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import marft_envs
from marft_agents.models.chat import prompt_ids

SLOT_KEYS = ("seed", "agent", "round")
REWARD_KEY = "marft_reward"
"""The extra rollout key carrying each row's reward (what :func:`env_reward` returns)."""
TRL_ADAPTER = "model"
"""The adapter name of every request: the trainer's one model answers every agent."""


def slot_prompt(seed: int, agent: str, round: int = 0) -> str:
    """The ``prompt`` value naming one agent-step slot (JSON, so the completions table shows it)."""
    return json.dumps({"seed": int(seed), "agent": agent, "round": int(round)})


def parse_slot(prompt: Any) -> tuple[int, str, int]:
    """``(seed, agent, round)`` from a slot prompt; anything else raises one line saying how to build one."""
    try:
        data = json.loads(prompt) if isinstance(prompt, str) else None
        return int(data["seed"]), str(data["agent"]), int(data["round"])
    except (TypeError, ValueError, KeyError):
        raise ValueError(
            f"MarftRollout: the prompt {str(prompt)[:80]!r} is not an agent-step slot; build the "
            "train dataset with marft_agents.rollout.trl.agent_step_dataset"
        ) from None


def agent_step_dataset(
    env_id: str, seeds: Iterable[int], *, rounds: int = 1, env_kwargs: Mapping[str, Any] | None = None
):
    """A ``datasets.Dataset`` with one ``prompt`` (a slot) per seed, round ``< rounds`` and agent, seed by seed."""
    import datasets

    agents = marft_envs.make(env_id, **dict(env_kwargs or {})).possible_agents
    rows = [slot_prompt(s, a, r) for s in seeds for r in range(rounds) for a in agents]
    if not rows:
        raise ValueError("agent_step_dataset: no rows; pass at least one seed and rounds >= 1")
    return datasets.Dataset.from_dict({"prompt": rows})


def env_reward(completions: list, marft_reward: list | None = None, **kwargs: Any) -> list[float | None]:
    """The reward function for :class:`MarftRollout`: the reward the rollout computed for each row."""
    if marft_reward is None:
        raise ValueError(f"env_reward needs the rollout's {REWARD_KEY!r} key: pass rollout_func=MarftRollout(...)")
    return list(marft_reward)


@dataclass
class Step:
    """One agent-step of an episode: exact token ids, the sampling log-probs, and the round's reward."""

    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    text: str
    reward: float = 0.0


@dataclass
class Episode:
    """The agent-steps of one played episode, by ``(agent, round)``."""

    seed: int
    steps: dict[tuple[str, int], Step] = field(default_factory=dict)

    def return_from(self, agent: str, round: int) -> float:
        """``agent``'s undiscounted return from ``round`` on."""
        return sum(s.reward for (a, r), s in self.steps.items() if a == agent and r >= round)


class MarftRollout:
    """A ``GRPOTrainer`` ``rollout_func``: plays marft episodes and returns one row per requested agent-step."""

    def __init__(self, env_id: str, *, env_kwargs: Mapping[str, Any] | None = None, max_rounds: int = 1000):
        self.env_id, self.env_kwargs, self.max_rounds = env_id, dict(env_kwargs or {}), max_rounds
        marft_envs.spec(env_id)  # an unknown id fails here, naming the closest

    def __call__(self, prompts: Sequence[Any], trainer: Any) -> dict[str, list]:
        slots = [parse_slot(p) for p in prompts]
        copy_of, copies = [], {}  # the j-th copy of a slot reads episode j of its seed
        for slot in slots:
            copy_of.append(copies.get(slot, 0))
            copies[slot] = copy_of[-1] + 1
        needed: dict[int, int] = {}
        for (seed, _, _), n in copies.items():
            needed[seed] = max(needed.get(seed, 0), n)
        episode_keys = [(seed, j) for seed, n in needed.items() for j in range(n)]
        played = dict(zip(episode_keys, self.play([seed for seed, _ in episode_keys], trainer)))
        pad = trainer.processing_class.pad_token_id
        rows = []
        for (seed, agent, round), j in zip(slots, copy_of):
            episode = played[(seed, j)]
            step = episode.steps.get((agent, round))
            if step is None:  # this episode never reached the slot: one masked token, no reward
                rows.append(([pad], [pad], [0.0], [0], None, agent, round))
            else:
                rows.append(
                    (
                        step.prompt_ids,
                        step.completion_ids,
                        step.logprobs,
                        [1] * len(step.completion_ids),
                        episode.return_from(agent, round),
                        agent,
                        round,
                    )
                )
        columns = ("prompt_ids", "completion_ids", "logprobs", "env_mask", REWARD_KEY, "marft_agent", "marft_round")
        return {column: [row[k] for row in rows] for k, column in enumerate(columns)}

    def play(self, seeds: Sequence[int], trainer: Any) -> list[Episode]:
        """Play one episode per seed, all envs together: per layer, one batched generate over every ready agent."""
        envs = [marft_envs.make(self.env_id, **self.env_kwargs) for _ in seeds]
        episodes = [Episode(seed=int(s)) for s in seeds]
        for env, seed in zip(envs, seeds):
            env.reset(seed=int(seed))
        for _ in range(self.max_rounds * max(len(e.possible_agents) for e in envs)):
            ready = [(i, a) for i, env in enumerate(envs) for a in env.ready_agents()]
            if not ready:
                return episodes
            generated = generate(trainer, [envs[i].observe(a) for i, a in ready])
            by_env: dict[int, dict[str, Step]] = {}
            for (i, agent), step in zip(ready, generated):
                by_env.setdefault(i, {})[agent] = step
                episodes[i].steps[(agent, envs[i].round)] = step
            for i, steps in by_env.items():
                round = envs[i].round
                result = envs[i].step({a: s.text for a, s in steps.items()})
                if result is not None:
                    for agent, reward in result.rewards.items():
                        episodes[i].steps[(agent, round)].reward = reward
        raise RuntimeError(f"MarftRollout: {self.env_id} episodes ran past max_rounds={self.max_rounds}")


def generate(trainer: Any, observations: Sequence[Mapping[str, str]]) -> list[Step]:
    """Sample one completion per observation with the trainer's model and generation config, in one batch.

    The sampling goes through a :class:`~marft_agents.engines.trl.TRLEngine` over the model TRL
    unwraps for generation, with the trainer's own ``generation_config``.
    """
    from trl.models import unwrap_model_for_generation

    from marft_agents.engines.trl import TRLEngine
    from marft_agents.models.sampling import Request

    if getattr(trainer, "use_vllm", False):
        raise ValueError("MarftRollout generates with transformers: set GRPOConfig(use_vllm=False)")
    tokenizer = trainer.processing_class
    prompts = [prompt_ids(tokenizer, obs) for obs in observations]
    requests = [Request(prompt=p, adapter=TRL_ADAPTER) for p in prompts]
    with unwrap_model_for_generation(
        trainer.model_wrapped, trainer.accelerator, generation_kwargs=trainer.generation_kwargs
    ) as model:
        engine = TRLEngine(
            model, tokenizer, trainer.generation_config, trainer.eos_token_ids, device=trainer.accelerator.device
        )
        gen = engine.generate(requests, engine.sampling)
    return [
        Step(prompt_ids=p, completion_ids=ids, logprobs=logps.tolist(), text=text)
        for p, ids, logps, text in zip(prompts, gen.responses, gen.token_logps, gen.texts)
    ]


# -- one agent: TRL generates, a marft env grades -------------------------------------------------


def solo_dataset(env_id: str, seeds: Iterable[int], *, env_kwargs: Mapping[str, Any] | None = None):
    """A conversational ``datasets.Dataset`` of a one-agent env's first observations, with each row's ``seed``."""
    import datasets

    env = _solo_env(env_id, env_kwargs)
    (agent,) = env.possible_agents
    prompts, used = [], []
    for seed in seeds:
        env.reset(seed=int(seed))
        obs = env.observe(agent)
        messages = [{"role": "system", "content": obs["instructions"]}] if obs["instructions"] else []
        prompts.append(messages + [{"role": "user", "content": obs["text"]}])
        used.append(int(seed))
    return datasets.Dataset.from_dict({"prompt": prompts, "seed": used})


def solo_reward(env_id: str, *, env_kwargs: Mapping[str, Any] | None = None) -> Callable[..., list[float]]:
    """A TRL reward function ``(completions, seed, **kwargs) -> rewards``: each completion stepped in the env reset with
    its seed."""
    env = _solo_env(env_id, env_kwargs)
    (agent,) = env.possible_agents

    def reward(completions: list, seed: list[int] | None = None, **kwargs: Any) -> list[float]:
        if seed is None:
            raise ValueError(f"solo_reward({env_id!r}) needs a 'seed' column: build the dataset with solo_dataset")
        rewards = []
        for completion, s in zip(completions, seed, strict=True):
            text = completion[-1]["content"] if isinstance(completion, list) else completion  # conversational or not
            env.reset(seed=int(s))
            result = env.step({agent: text})  # a one-agent round ends on its one action
            rewards.append(float(result.rewards[agent]))
        return rewards

    reward.__name__ = f"marft_{env_id.split('/')[-1].replace('-', '_')}"
    return reward


def _solo_env(env_id: str, env_kwargs: Mapping[str, Any] | None):
    env = marft_envs.make(env_id, **dict(env_kwargs or {}))
    if len(env.possible_agents) != 1:
        raise ValueError(
            f"{env_id} has {len(env.possible_agents)} agents; solo_reward and solo_dataset take a one-agent "
            "env (e.g. marft/MathSolo-v0): use MarftRollout for multi-agent envs"
        )
    return env

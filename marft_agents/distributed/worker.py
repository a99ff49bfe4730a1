"""A rollout worker: what one Ray actor holds and does (its envs, engine, base model and every adapter).

:class:`RolloutWorker` is a plain class; :mod:`marft_agents.distributed.pool` makes it a Ray actor.
It builds everything from a :class:`WorkerSpec` (the same model and adapters as the trainer's
policy), loads the adapter weights the trainer publishes (:meth:`RolloutWorker.load`: a version and
a reference to the weights in Ray's object store) and plays the episodes it is given: training
episodes sampled per episode (:mod:`marft_agents.engines.seeded`), or evaluation episodes (greedy, or
sampled from their own seeds). It keeps no state between calls but its envs and the weights, so a restarted worker plays
a batch exactly as the first one would have.

``MARFT_RAY_TEST_FAULT=PATH`` (tests only): the first worker to find the file ``PATH`` when a training
batch starts takes it and, after that batch's first finished episode, kills itself (SIGKILL) when the
file says ``die``, or hangs when it says ``hang``.
"""

from __future__ import annotations

import json
import os
import signal
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from marft_agents.settings.agents import AgentSettings, lora_values, sampling_values, values

if TYPE_CHECKING:  # torch is imported when a worker is built, not with the spec
    from marft_agents.models.sampling import Sampling

FAULT_VAR = "MARFT_RAY_TEST_FAULT"
"""The test-only fault hook's environment variable (forwarded to the workers)."""


@dataclass(frozen=True)
class WorkerSpec:
    """Everything a rollout worker builds itself from (the run's values; no config object)."""

    env: str
    """The env id (or ``module:Class``)."""
    env_kwargs: dict[str, Any]
    """The training envs' options."""
    model: str
    """The base model, as ``TrainConfig.model``."""
    adapter_mode: str
    """"lora", "shared" or "copies"."""
    lora_r: int
    """LoRA rank."""
    lora_alpha: int
    """LoRA alpha."""
    lora_targets: tuple[str, ...]
    """Module names with LoRA adapters."""
    temperature: float
    """Training sampling temperature."""
    max_new_tokens: int
    """Longest response, in tokens."""
    seed: int
    """The run's seed (per-episode sampling seeds derive from it)."""
    top_k: int = 0
    """Training draws among the ``top_k`` likeliest tokens (0: all)."""
    top_p: float = 1.0
    """Training draws among the likeliest tokens whose probability reaches ``top_p`` (1.0: all)."""
    stop: tuple[str, ...] = ()
    """Strings that end a response."""
    agents: dict[str, AgentSettings] = field(default_factory=dict)
    """Each agent's own settings (``agents.<agent_id>.*``: its temperature, token limit, top-k, top-p, stop strings);
    unset: the run's above."""
    threads: int = 1
    """torch threads in the worker."""
    record_state: bool = False
    """Keep the env's global state with every agent-step (centralised critics)."""
    skip_ignored: bool = True
    """Generate nothing for actions the env will ignore (``RolloutEngine(skip_ignored=)``)."""
    imports: tuple[str, ...] = ()
    """Modules imported first (they register the run's envs or algorithms)."""
    engine: dict[str, Any] = field(default_factory=lambda: {"engine": "hf"})
    """The ``generation.*`` settings (``EngineConfig`` as a dict)."""
    work_dir: str = ""
    """A folder the vllm engine may write adapters into (empty: a temporary one)."""


class RolloutWorker:
    """One rollout worker: builds the policy and engine of a :class:`WorkerSpec`, then plays episodes."""

    def __init__(self, spec: WorkerSpec):
        import torch

        import marft_envs
        from marft_agents.models.policy import LaMASPolicy, load_base
        from marft_envs.plugins import import_modules, resolve

        torch.set_num_threads(max(1, spec.threads))
        import_modules(list(spec.imports))
        resolve(spec.env)
        self.spec = spec
        probe = marft_envs.make(spec.env, **spec.env_kwargs)
        model, tokenizer = load_base(spec.model)
        self.policy = LaMASPolicy(
            model,
            tokenizer,
            probe.possible_agents,
            mode=spec.adapter_mode,
            lora_r=spec.lora_r,
            lora_alpha=spec.lora_alpha,
            lora_targets=tuple(spec.lora_targets),
            agent_lora=lora_values(spec.agents),  # the trainer's adapters' shapes: the weights it publishes fit them
            lean_decode=spec.engine.get("lean_decode", True),
        )
        self.engine = None
        """Built at the first :meth:`load`, on the trainer's weights (vLLM must start on them: its versions only
        increase)."""
        self.version = -1
        """The version of the adapter weights loaded (-1: none yet, the fresh adapters are not the trainer's)."""
        self.envs: dict[str, list] = {json.dumps(spec.env_kwargs, sort_keys=True, default=str): [probe]}

    def _build_engine(self):
        g = self.spec.engine
        if g.get("engine", "hf") == "hf":
            from marft_agents.engines.seeded import EpisodeSeededEngine

            return EpisodeSeededEngine(self.policy)
        import tempfile

        from marft_agents.engines import make_engine

        work_dir = self.spec.work_dir or tempfile.mkdtemp(prefix="marft-worker-")
        return make_engine(
            g["engine"],
            self.policy,
            model=self.spec.model,
            work_dir=work_dir,
            dtype=g.get("dtype", "float32"),
            kv_cache_gb=g.get("kv_cache_gb", 1.0),
            threads=g.get("threads", 0),
            max_loras=g.get("max_loras", 0),
            seed=self.spec.seed,
            max_new_tokens=max([self.spec.max_new_tokens, *values(self.spec.agents, "max_new_tokens").values()]),
        )

    def ready(self) -> int:
        """The worker's process id, once it is built."""
        return os.getpid()

    def load(self, version: int, weights: list) -> int:
        """Use the adapter weights ``weights[0]`` (a Ray object reference) as ``version``, unless loaded already."""
        if version != self.version:
            import ray

            states = ray.get(weights[0])
            for adapter, state in states.items():
                self.policy.load_adapter_state(adapter, state)
            if self.engine is None:
                self.engine = self._build_engine()
                self.engine.version = version
            else:
                self.engine.sync(version)
            self.version = version
        return self.version

    def collect(
        self,
        version: int,
        weights: list,
        indices: list[int],
        seeds: list[int],
        options: list[dict | None] | None = None,
        env_kwargs: dict | None = None,
        evaluation: tuple[Sampling, dict[str, Sampling], int] | None = None,
    ) -> tuple[list, dict[str, float]]:
        """Play episodes ``indices`` (env seeds ``seeds``) with weights ``version``: ``(episodes, timings)``.

        Training episodes (``evaluation`` None) sample with the per-episode generators of ``(seed,
        version, index)``, each agent at its own settings where the spec's ``agents`` set them; evaluation
        episodes use ``options`` and ``env_kwargs`` and play under ``evaluation``: the evaluation's sampling,
        each agent's own, and the seed of a sampled evaluation's draws
        (:func:`~marft_agents.rollout.evaluation.eval_sampling`, :func:`~marft_agents.rollout.evaluation.eval_seeds`).
        """
        from marft_agents.engines.seeded import episode_seed
        from marft_agents.models.sampling import Sampling, agent_sampling
        from marft_agents.rollout.evaluation import eval_seeds
        from marft_agents.rollout.layered import RolloutEngine

        self.load(version, weights)
        kwargs = self.spec.env_kwargs if env_kwargs is None else env_kwargs
        envs = self._envs(kwargs, len(indices))
        if evaluation is None:
            s = self.spec
            sampling = Sampling(s.temperature, s.max_new_tokens, s.top_k, s.top_p, tuple(s.stop))
            own = agent_sampling(sampling, **sampling_values(s.agents))
            episode_seeds = {i: episode_seed(s.seed, version, i) for i in indices}
        else:
            sampling, own, eval_seed = evaluation
            episode_seeds = eval_seeds(eval_seed, indices)  # a greedy evaluation draws none of them
        if hasattr(self.engine, "seed_episodes"):
            self.engine.seed_episodes(episode_seeds)
        rollout = RolloutEngine(
            self.policy,
            sampling,
            record_state=self.spec.record_state and evaluation is None,
            engine=self.engine,
            skip_ignored=self.spec.skip_ignored,
            agent_sampling=own,
        )
        seed_of = dict(zip(indices, seeds)).__getitem__
        option_of = dict(zip(indices, options or [None] * len(indices))).__getitem__
        episodes = rollout.collect(
            envs, indices, seed_of=seed_of, options_of=option_of, progress=None if evaluation else _fault_hook()
        )
        return episodes, dict(rollout.timings)

    def _envs(self, env_kwargs: dict, n: int) -> list:
        """At least ``min(n, 128)`` envs built with ``env_kwargs`` (kept for later batches), the first ones."""
        import marft_envs

        envs = self.envs.setdefault(json.dumps(env_kwargs, sort_keys=True, default=str), [])
        want = min(n, 128)  # as the trainer and evaluation do in one process
        envs.extend(marft_envs.make(self.spec.env, **env_kwargs) for _ in range(want - len(envs)))
        return envs[:want]


def _fault_hook():
    """The test-only fault (see the module docstring) as a rollout progress callback, or None."""
    path = os.environ.get(FAULT_VAR, "")
    taken = f"{path}.{os.getpid()}"
    try:
        os.rename(path, taken)  # atomic: exactly one worker takes the file
    except OSError:
        return None
    with open(taken) as f:
        kind = f.read().strip()
    os.unlink(taken)

    def fault(_finished: int) -> None:
        if kind == "die":
            os.kill(os.getpid(), signal.SIGKILL)
        elif kind == "hang":
            time.sleep(3600)

    return fault

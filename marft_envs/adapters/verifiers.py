"""Any marft env as a verifiers v1 environment (verifiers==0.4.0): one ``Env`` per env, one ``AgentConfig`` per agent.

verifiers (https://github.com/PrimeIntellect-ai/verifiers) loads a run from a *plugin id*: an
importable module whose ``__all__`` exports one ``Taskset``, optionally one ``Env`` and one
``Harness``. :func:`plugin` builds that module for a marft id (and its constructor kwargs) and
registers it under a top-level name (``marft_mathchain_v0``; a hash suffix when kwargs are given),
so verifiers' own loaders (``vf.load_taskset``, ``vf.load_environment``, the validation run) find it
in this process. :func:`verifiers_env` goes through ``vf.resolve_env_config`` and
``vf.load_environment`` to the env::

    env = verifiers_env("marft/MathChain-v0", reasoner_0={"model": "m1"}, actor_0={"model": "m2"})

- **Tasks**: one per reset seed (``taskset.num_tasks`` from ``taskset.first_seed``); a task is the
  env id, its kwargs and the seed.
- **Agents**: the env's config has one ``AgentConfig`` field per agent (``reasoner_0``,
  ``actor_0``), run on the subprocess runtime with this module's harness unless pinned otherwise.
- **run()** walks each round's graph: the ready agents (one layer of the round graph) each run
  once on their step — system prompt the agent's instructions, prompt what it sees — all of a
  layer together (``asyncio.TaskGroup``; ``max_concurrent_agents`` bounds how many run at once,
  one by default), then their replies (``trace.last_reply``) are the layer's ``step``. A step whose
  run failed acts with its empty reply, which the env grades; the failure stays on its trace. Each
  agent-step is one trace, as each is one sample in marft.
- **finalize()** writes on every trace ``agent``, the agent's return from its step's round on
  (weight ``agent_weight``, 1), and ``team``, the mean of all agents' episode returns (weight
  ``team_weight``, 0: recorded, not added to ``trace.reward``); metrics ``round`` and ``solved``
  (when the env reports it).
- **The harness** (:class:`StepHarness`): one chat completion per step, posted from this process
  to the run's interception endpoint, so nothing is installed in a runtime; any other harness
  (``null``, ``bash``) plays a seat when pinned (``actor_0={"harness": {"id": "null"}}``).
- **Validation** (verifiers' gold and noop checks): ``Task.validate`` plays the episode with
  ``taskset.gold_policy`` (``"module:factory"``; ``factory(env, **gold_policy_kwargs)`` is a policy
  ``(agent, observation, rng) -> str`` as in :mod:`marft_envs.tasks.math.scripted`) and passes when
  it is solved (no ``solved`` key: when the team reward reaches 1); unchecked without one. The task's
  ``@vf.reward team`` scores a trace of its own: the episode in which every agent sends that trace's
  reply — an untouched task (empty replies) must not pass. Episodes never use it: their step tasks
  defer scoring, and ``finalize`` writes the rewards.

verifiers' commands (``vf-eval``, ``vf-validate``) run in a fresh process and import a plugin by name:
each shipped env has an installed package of that name (``plugins/verifiers/marft_mathchain_v0``, its
default kwargs), made by :func:`define_plugin`; ``vf-eval marft_mathchain_v0`` finds it. An env of your
own, or other kwargs, gets a module of yours that calls :func:`define_plugin` (docs/adapters.md).
``verifiers`` is imported when a plugin is built, never by ``import marft_envs``.

Version history:
    v0: first release (verifiers 0.4.0).
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import importlib.util
import json
import keyword
import re
import sys
import types
from collections.abc import Callable
from typing import Any

import numpy as np

from marft_envs.core import FlexEnv, RoundResult
from marft_envs.outcomes import SOLVED
from marft_envs.registration import make

INFO_KEY = "marft"
"""Where run() leaves each step's outcome on its trace (``trace.info``), for finalize to record."""
LAZY = ("MarftTaskData", "MarftTask", "MarftTasksetConfig", "MarftEnvConfig", "StepHarnessConfig", "StepHarness")
"""The classes shared by every plugin: they subclass verifiers', so they are built when first asked for
(this module imports without verifiers, as every marft module does)."""
_built: dict[str, type] = {}
_plugins: dict[str, types.ModuleType] = {}


def __getattr__(name: str) -> Any:
    if name in LAZY:
        return _classes()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _require_verifiers() -> None:
    if importlib.util.find_spec("verifiers") is None:
        raise ImportError("the verifiers adapter needs verifiers 0.4.0: see docs/adapters.md, verifiers v1 (its own venv)")


# -- episodes, without verifiers --------------------------------------------------------------------


def _episode_env(info: dict[str, Any]) -> FlexEnv:
    """A fresh FlexEnv for one task, reset on its seed (each episode its own: episodes run concurrently)."""
    flex = make(info["env"], **info["env_kwargs"])
    flex.reset(seed=info["seed"])
    return flex


def _solved(result: RoundResult, before: bool | None) -> bool | None:
    flags = [bool(i[SOLVED]) for i in result.infos.values() if SOLVED in i]
    return any(flags) if flags else before


def _team(by_round: list[dict[str, float]], agents: list[str]) -> float:
    """The mean over agents of their episode returns."""
    return sum(r.get(a, 0.0) for r in by_round for a in agents) / len(agents)


def _walk(flex: FlexEnv, choose: Callable[[str, dict], str]) -> tuple[list[dict[str, float]], bool | None]:
    """Play the episode to its end with ``choose(agent, observation)``: each round's rewards, and ``solved``."""
    by_round: list[dict[str, float]] = []
    solved = None
    while flex.agents:
        result = flex.step({a: choose(a, flex.observe(a)) for a in flex.ready_agents()})
        if result is not None:
            by_round.append(dict(result.rewards))
            solved = _solved(result, solved)
    return by_round, solved


def _import(path: str) -> Callable:
    module, _, attr = path.partition(":")
    if not module or not attr:
        raise ValueError(f"gold_policy must be 'module:factory', got {path!r}")
    return getattr(importlib.import_module(module), attr)


def _step_task(task: Any, agent: str, rnd: int, seen: dict[str, str]) -> Any:
    """The task one agent-step runs: its instructions as system prompt, what it sees as prompt.
    Scoring is deferred: the step's reward depends on the whole round, which finalize sees."""
    update = {"prompt": seen["text"], "system_prompt": seen["instructions"] or None, "name": f"{task.data.name}/{agent}/{rnd}"}
    return task.with_data(**update, info={**task.data.info, "agent": agent, "round": rnd}).defer_scoring()


async def _play(self: Any, task: Any, agents: Any) -> None:
    """``Env.run``: one episode, one layer of the round graph at a time (see the module docstring)."""
    import verifiers.v1 as vf

    flex = _episode_env(task.data.info)
    roles = {name for name, value in self.config if isinstance(value, vf.AgentConfig)}
    if not set(flex.possible_agents) <= roles:
        raise ValueError(f"the task's env has agents {flex.possible_agents}, this env seats {sorted(roles)}: use plugin() for its kwargs")
    steps: list[tuple[str, int, Any]] = []
    by_round: list[dict[str, float]] = []
    solved = None
    while flex.agents:
        layer, rnd = flex.ready_agents(), flex.round
        views = {a: flex.observe(a) for a in layer}
        # A layer's agents depend on none of each other this round: written as concurrent, bounded by
        # max_concurrent_agents. A TaskGroup cancels the others when one run raises.
        async with asyncio.TaskGroup() as group:
            runs = [group.create_task(getattr(agents, a).run(_step_task(task, a, rnd, views[a]))) for a in layer]
        traces = [r.result() for r in runs]
        steps += [(a, rnd, t) for a, t in zip(layer, traces)]
        result = flex.step({a: t.last_reply for a, t in zip(layer, traces)})
        if result is not None:
            by_round.append(dict(result.rewards))
            solved = _solved(result, solved)
    team = _team(by_round, flex.possible_agents)
    for agent, rnd, trace in steps:
        to_go = sum(r.get(agent, 0.0) for r in by_round[rnd:])
        trace.info[INFO_KEY] = {"agent": agent, "round": rnd, "return": to_go, "team": team, "solved": solved}


async def _finalize(self: Any, task: Any, episode: Any) -> None:
    """``Env.finalize``: the rewards run() computed, recorded on every trace (strictly: none missing)."""
    for trace in episode.traces:
        step = trace.info.get(INFO_KEY)
        if step is None:
            raise ValueError(f"a trace of {trace.agent.name!r} has no {INFO_KEY!r} outcome: its round never ended")
        trace.record_reward("agent", step["return"], weight=self.config.agent_weight)
        trace.record_reward("team", step["team"], weight=self.config.team_weight)
        trace.record_metric("round", float(step["round"]))
        if step["solved"] is not None:
            trace.record_metric("solved", float(step["solved"]))


def _load_tasks(self: Any):
    """``Taskset.load``: one task per seed."""
    cfg, built = self.config, _classes()
    for seed in range(cfg.first_seed, cfg.first_seed + cfg.num_tasks):
        info = {
            "env": cfg.env,
            "env_kwargs": dict(cfg.env_kwargs),
            "seed": seed,
            "gold_policy": cfg.gold_policy,
            "gold_policy_kwargs": dict(cfg.gold_policy_kwargs),
        }
        data = built["MarftTaskData"](id=f"{cfg.env}#{seed}", name=f"{cfg.env}#{seed}", info=info)
        yield built["MarftTask"](data, cfg.task)


# -- the verifiers classes ----------------------------------------------------------------------------


def _classes() -> dict[str, type]:
    """Build the classes every plugin shares, once verifiers is importable."""
    if _built:
        return _built
    _require_verifiers()
    import httpx
    import verifiers.v1 as vf
    from pydantic import Field
    from verifiers.v1.dialects.chat import message_to_wire

    class MarftTaskData(vf.TaskData):
        """One episode: the env id, its kwargs, the reset seed and the gold policy, in ``info``."""

        info: dict[str, Any]

    class MarftTask(vf.Task[MarftTaskData, vf.State, vf.TaskConfig]):
        """One episode of a marft env; its own checks are verifiers' validation (episodes are scored in finalize)."""

        async def validate(self, runtime: Any) -> bool | None:
            """The gold check: the gold policy's episode is solved (None: no gold policy)."""
            info = self.data.info
            if not info.get("gold_policy"):
                return None
            flex = _episode_env(info)
            policy = _import(info["gold_policy"])(flex, **info["gold_policy_kwargs"])
            rng = np.random.default_rng(info["seed"])
            by_round, solved = _walk(flex, lambda a, seen: policy(a, seen, rng))
            return bool(solved) if solved is not None else _team(by_round, flex.possible_agents) >= 1.0

        @vf.reward
        async def team(self, trace: Any) -> float:
            """The team reward when every agent sends this trace's reply (the noop check: an untouched
            task, empty replies, must not pass)."""
            reply = trace.last_reply
            flex = _episode_env(self.data.info)
            by_round, _ = _walk(flex, lambda a, seen: reply)
            return _team(by_round, flex.possible_agents)

    class MarftTasksetConfig(vf.TasksetConfig):
        """Which episodes a marft env's taskset holds: seeds ``first_seed .. first_seed + num_tasks - 1``."""

        env: str = ""
        """The marft env id (a plugin's default: the one it was built for)."""
        env_kwargs: dict[str, Any] = Field(default_factory=dict)
        """The env's constructor kwargs (JSON values: they travel in each task's data)."""
        num_tasks: int = Field(100, ge=1)
        """How many tasks (episodes, one reset seed each)."""
        first_seed: int = Field(0, ge=0)
        """The first task's reset seed."""
        gold_policy: str | None = None
        """``"module:factory"`` of the gold check's policy; None: the gold check is unchecked."""
        gold_policy_kwargs: dict[str, Any] = Field(default_factory=dict)

    class MarftEnvConfig(vf.EnvConfig):
        """What every marft env's config adds to verifiers': the weights of the rewards finalize writes."""

        agent_weight: float = 1.0
        """Weight of ``agent`` (the agent's return from its step's round on) in ``trace.reward``."""
        team_weight: float = 0.0
        """Weight of ``team`` (the mean of the agents' episode returns); 0 records it without adding it."""

    class StepHarnessConfig(vf.HarnessConfig):
        """The step harness's config: verifiers' harness knobs, none of its own."""

    class StepHarness(vf.Harness[StepHarnessConfig]):
        """One chat completion per agent-step, posted from this process to the run's interception endpoint."""

        APPENDS_SYSTEM_PROMPT = True  # the agent's instructions go as a system message
        SUPPORTS_RESUME = True  # a resumed exchange arrives as Messages, which launch sends as they are
        EXECUTES_CODE = False
        NEEDS_CONTAINER = False

        async def launch(self, ctx, trace, runtime, endpoint, secret, mcp_urls, data, tool_interception_url=None):
            system, prompt = self.resolve_prompt(data)
            messages = [{"role": "system", "content": system}] if system else []
            if isinstance(prompt, str):
                messages.append({"role": "user", "content": prompt})
            else:
                messages += [message_to_wire(m) for m in prompt or []]
            # The interception server records the turn on the trace and answers; the reply is read from the trace.
            async with httpx.AsyncClient(timeout=None) as client:  # the agent's rollout timeout bounds it
                answer = await client.post(
                    f"{endpoint}/chat/completions",
                    json={"model": ctx.model, "messages": messages},
                    headers={"Authorization": f"Bearer {secret}"},
                )
            if answer.status_code >= 400:
                return vf.ProgramResult(exit_code=1, stdout="", stderr=f"model call: HTTP {answer.status_code}: {answer.text[-2000:]}")
            return vf.ProgramResult(exit_code=0, stdout="", stderr="")

    _built.update({c.__name__: c for c in (MarftTaskData, MarftTask, MarftTasksetConfig, MarftEnvConfig, StepHarnessConfig, StepHarness)})
    return _built


def _module_name(env_id: str, env_kwargs: dict[str, Any]) -> str:
    slug = re.sub(r"[^0-9a-z]+", "_", env_id.rsplit("/", 1)[-1].lower()).strip("_")
    if not env_kwargs:
        return f"marft_{slug}"
    digest = hashlib.sha256(json.dumps(env_kwargs, sort_keys=True, default=repr).encode()).hexdigest()[:8]
    return f"marft_{slug}_{digest}"


def plugin(env: str, env_kwargs: dict[str, Any] | None = None) -> str:
    """The verifiers plugin id (taskset id) of ``env`` built with ``env_kwargs``, registered in this process.

    The plugin module exports ``Taskset``, ``Env`` (its ``EnvConfig`` has one ``AgentConfig`` field per
    agent of the env) and ``Harness`` (:class:`StepHarness`, the seats' default). Built once per process;
    a shipped env without kwargs is its installed package (``plugins/verifiers/``), imported.
    """
    kwargs = dict(env_kwargs or {})
    name = _module_name(env, kwargs)
    if name not in _plugins and name not in sys.modules and not kwargs and importlib.util.find_spec(name) is not None:
        importlib.import_module(name)  # the installed package registers itself (define_plugin)
    if name in _plugins:
        return name
    if name in sys.modules:
        raise ValueError(f"cannot register the plugin {name!r} for {env}: a module of that name is already imported")
    module = types.ModuleType(name, f"The verifiers plugin of {env} (built by {__name__}.plugin).")
    _fill(module, env, kwargs)
    _plugins[name] = sys.modules[name] = module
    return name


def define_plugin(name: str, env: str, env_kwargs: dict[str, Any] | None = None) -> list[str]:
    """Make the module ``name``, while it is imported, the verifiers plugin of ``env`` built with ``env_kwargs``.

    What an installed plugin module calls, so that verifiers' commands (``vf-eval NAME``, ``vf-validate NAME``)
    import it in a fresh process::

        __all__ = define_plugin(__name__, "marft/MathDebate-v0", {"n_agents": 3})

    Sets the module's ``Taskset``, ``Env``, ``Harness`` and their configs; returns its ``__all__``.
    """
    module = sys.modules.get(name)
    if module is None:
        raise ValueError(f"define_plugin({name!r}, ...) defines the module being imported: call it as define_plugin(__name__, ...)")
    exported = _fill(module, env, dict(env_kwargs or {}))
    _plugins[name] = module
    return exported


def _fill(module: types.ModuleType, env_id: str, env_kwargs: dict[str, Any]) -> list[str]:
    """Set the plugin's classes on ``module`` (named for its taskset id) and its ``__all__``; returns ``__all__``."""
    name = module.__name__
    built = _classes()
    import verifiers.v1 as vf
    from pydantic import Field, SerializeAsAny, create_model

    probe = make(env_id, **env_kwargs)
    agents = list(probe.possible_agents)
    probe.close()
    taken = set(built["MarftEnvConfig"].model_fields)
    bad = [a for a in agents if not a.isidentifier() or keyword.iskeyword(a) or a.startswith("_") or a in taken]
    if bad:
        raise ValueError(f"agents {bad} of {env_id} cannot be verifiers seats (config fields: identifiers, none of {sorted(taken)})")
    title = "".join(part.capitalize() for part in name.split("_"))
    taskset_config = create_model(
        f"{title}TasksetConfig",
        __base__=built["MarftTasksetConfig"],
        env=(str, env_id),
        env_kwargs=(dict[str, Any], Field(default_factory=lambda: dict(env_kwargs))),
    )
    seat = vf.AgentConfig(runtime={"type": "subprocess"})  # the step harness runs nothing in it
    env_config = create_model(
        f"{title}EnvConfig",
        __base__=built["MarftEnvConfig"],
        taskset=(SerializeAsAny[vf.TasksetConfig], taskset_config(id=name)),
        **{a: (vf.AgentConfig, seat.model_copy()) for a in agents},
    )

    class Taskset(vf.Taskset[built["MarftTask"], taskset_config]):
        """One task per reset seed of the marft env."""

        load = _load_tasks

    class Env(vf.Env[env_config]):
        """The marft env's episode: each round's graph walked layer by layer, rewards written in finalize."""

        run = _play
        finalize = _finalize

    module.Taskset, module.TasksetConfig, module.Task = Taskset, taskset_config, built["MarftTask"]
    module.Env, module.EnvConfig = Env, env_config
    module.Harness, module.HarnessConfig = built["StepHarness"], built["StepHarnessConfig"]
    # verifiers' loaders take the one Taskset, Env and Harness subclass each that __all__ names.
    module.__all__ = ["Env", "EnvConfig", "Harness", "HarnessConfig", "Task", "Taskset", "TasksetConfig"]
    return list(module.__all__)


def verifiers_env(env: str, env_kwargs: dict[str, Any] | None = None, **config: Any):
    """A verifiers v1 ``Env`` for the marft env ``env`` (built with ``env_kwargs``), made by verifiers' loader.

    ``config`` is its ``EnvConfig``: one field per agent (``actor_0={"model": ..., "client": ...}``, merged
    onto the seat's default), ``taskset={"num_tasks": ..., "gold_policy": ...}``, ``agent_weight``,
    ``team_weight``, and verifiers' own (``max_concurrent_agents``, ``timeout``, ...).
    """
    _require_verifiers()
    import verifiers.v1 as vf

    name = plugin(env, env_kwargs)
    taskset = {**dict(config.pop("taskset", None) or {}), "id": name}
    return vf.load_environment(vf.resolve_env_config({**config, "taskset": taskset}))

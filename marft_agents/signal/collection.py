"""How the trainer collects an update's batch: as configured, or with the ``signal.*`` options.

Without options (the default) one collection plays episodes ``[u E, (u + 1) E)`` of update ``u``,
each group of ``G`` consecutive episodes on one seed, hence one problem, exactly as the trainer always
did. ``signal.curriculum`` adds a difficulty level per group (``marft_agents/signal/curriculum.py``);
``signal.dynamic_sampling`` replaces all-equal groups with fresh ones
(``marft_agents/signal/dynamic.py``). Both are refused in one line where they cannot work.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from marft_agents.engines.seeded import EpisodeSeededEngine, episode_seed
from marft_agents.rollout.episode import Episode
from marft_agents.settings.text import ConfigError
from marft_agents.signal.config import SignalConfig
from marft_agents.signal.curriculum import DifficultySampler, check_levels, sampler_rng
from marft_agents.signal.dynamic import collect_informative, draw_indices


def check(settings: SignalConfig, env: Any, *, group_size: int, workers: int, algo: str) -> tuple:
    """Refuse ``signal.*`` options this run cannot use, in one line; returns the env's difficulty levels."""
    if settings.enabled and workers:
        raise ConfigError(
            "signal.dynamic_sampling and signal.curriculum run in the trainer's process, which "
            "rollout workers do not do yet: use distributed.workers=0"
        )
    if settings.dynamic_sampling and group_size < 2:
        raise ConfigError(
            f"signal.dynamic_sampling drops groups of episodes that played one problem, but algo={algo} "
            "plays each problem once: use a group-relative algo (algo=grpo)"
        )
    levels = declared_levels(env, strict=settings.curriculum)
    if settings.curriculum and not levels:
        raise ConfigError(
            "signal.curriculum needs an env that declares difficulty levels (difficulties(); MATH: "
            "problems='synthetic' or a file with a level column; docs/contract.md)"
        )
    return levels


def rank_share(indices: range, group_size: int, rank: int, world: int) -> range:
    """The episodes of ``indices`` that data-parallel rank ``rank`` of ``world`` plays: a run of whole groups.

    The groups are dealt in contiguous blocks, lower ranks first, so that the ranks' shares laid end to
    end are ``indices`` again (the batch one process would play, in its order); the first
    ``n_groups % world`` ranks take one group more.
    """
    groups = len(indices) // max(group_size, 1)
    first = rank * (groups // world) + min(rank, groups % world)
    count = groups // world + (rank < groups % world)
    return indices[first * group_size : (first + count) * group_size]


def declared_levels(env: Any, *, strict: bool = True) -> tuple:
    """The env's ``difficulties()``, checked (:func:`check_levels`); ``strict=False``: () where they are unusable.

    ``strict``: a ``difficulties()`` that raises, or levels a curriculum cannot use, is a :class:`ConfigError` naming
    it.
    """
    if not hasattr(env, "difficulties"):
        return ()
    source = f"{type(env).__name__}.difficulties()"
    try:
        levels = tuple(env.difficulties())
    except Exception as err:  # the env's own code: one line naming it, not its traceback
        if not strict:
            return ()
        reason = f"{type(err).__name__}: {str(err).splitlines()[0][:160] if str(err).strip() else ''}".rstrip(": ")
        raise ConfigError(
            f"signal.curriculum: {source} failed ({reason}); fix it, or turn signal.curriculum off"
        ) from None
    try:
        return check_levels(levels, source)
    except ValueError as err:
        if not strict:
            return ()
        raise ConfigError(f"signal.curriculum: {err}") from None


class BatchCollector:
    """One update's episodes: the plain collection, or dynamic sampling and a curriculum over it."""

    def __init__(
        self,
        rollout: Any,
        envs: Sequence[Any],
        engine: Any,
        settings: SignalConfig,
        *,
        seed: int,
        episodes_per_update: int,
        updates: int,
        group_size: int,
        workers: int,
        algo: str,
        stopping: Callable[[], bool] = lambda: False,
        rank: int = 0,
        world: int = 1,
    ):
        """``rollout`` plays the episodes on ``envs`` (the rollout engine or the worker pool); ``engine`` samples
        their tokens (an episode-seeded one is told each batch's seeds). ``stopping()``: whether the run was
        asked to stop (a signal); dynamic sampling then draws no more.

        ``rank`` of ``world`` data-parallel ranks plays only its share of each batch (:func:`rank_share`).
        """
        levels = check(settings, envs[0], group_size=group_size, workers=workers, algo=algo)
        self.rollout, self.envs, self.engine = rollout, envs, engine
        self.settings = settings
        self.stopping = stopping
        self.seed, self.episodes_per_update, self.updates, self.group = seed, episodes_per_update, updates, group_size
        self.rank, self.world = rank, world
        self.sampler = None
        if settings.curriculum:
            self.sampler = DifficultySampler(
                levels,
                window=settings.curriculum_window,
                low=settings.curriculum_low,
                high=settings.curriculum_high,
                floor=settings.curriculum_floor,
            )

    def collect(self, update: int) -> tuple[list[Episode], dict[str, float]]:
        """The batch of ``update`` and the ``signal/*`` metrics of how it was drawn (none by default)."""
        draws = iter(range(self.settings.max_draws))

        def one(indices: range) -> list[Episode]:
            return self._play(rank_share(indices, self.group, self.rank, self.world), update, next(draws))

        if self.settings.dynamic_sampling:
            episodes, metrics = collect_informative(
                one,
                update=update,
                episodes_per_update=self.episodes_per_update,
                updates=self.updates,
                group_size=self.group,
                max_draws=self.settings.max_draws,
                stopping=self.stopping,
            )
        else:
            episodes, metrics = one(draw_indices(0, update, self.episodes_per_update, self.updates)), {}
        if self.sampler is not None:
            metrics.update(self.sampler.metrics())  # the levels' success before this batch is recorded
        return episodes, metrics

    def start(self, update: int) -> Any:
        """Start playing ``update``'s batch on the rollout workers now (``distributed.overlap``); ``.result()`` waits
        for it."""
        indices = draw_indices(0, update, self.episodes_per_update, self.updates)
        return self.rollout.start_collect(self.envs, indices, seed_of=self._env_seed)

    def _play(self, indices: range, update: int, draw: int) -> list[Episode]:
        options = {}  # rollout workers take no reset options; they are refused with the signal options
        if self.sampler is not None:
            levels = self.sampler.assign(indices, self.group, sampler_rng(self.seed, update, draw))
            options["options_of"] = lambda i: {"difficulty": levels[i]}
        if isinstance(self.engine, EpisodeSeededEngine):  # the seeds a worker would use for these episodes
            self.engine.seed_episodes({i: episode_seed(self.seed, update, i) for i in indices})
        episodes = self.rollout.collect(self.envs, indices, seed_of=self._env_seed, **options)
        if self.sampler is not None:
            self.sampler.record(episodes)
        return episodes

    def _env_seed(self, index: int) -> int:
        return self.seed * 1_000_003 + index // self.group  # episodes of one group share a seed, hence a problem

    def state_dict(self) -> dict:
        """What a checkpoint keeps: the curriculum's windows (nothing without one)."""
        return {"curriculum": self.sampler.state_dict()} if self.sampler is not None else {}

    def load_state_dict(self, state: dict) -> None:
        if self.sampler is not None and "curriculum" in state:
            self.sampler.load_state_dict(state["curriculum"])

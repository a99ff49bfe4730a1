"""Per-episode sampling: each episode draws its tokens from its own generator, seeded from the episode.

In one process the rollout samples every token from torch's global generator, so what an episode
draws depends on which episodes were generated before it and beside it. Rollout workers must not
depend on that: a worker that is restarted plays its episodes again, and which worker plays an
episode must not change it. :class:`EpisodeSeededEngine` gives every episode a ``torch.Generator``
seeded from ``(run seed, update, episode index)`` (:func:`episode_seed`) and draws each row's next
token with its episode's generator (``generators`` of :func:`marft_agents.models.lm.generate`: one
uniform number per row and token), only while the row is still generating, so an episode's draws do
not depend on how long the other rows of a batch run.

Behaviour log-probs are those of the distribution the row drew from, as without the seeding. Greedy
requests (evaluation) draw nothing. Requests are
grouped by adapter and sampling as the hf engine groups them (an agent's own temperature or token
limit: a call of its own).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from marft_agents.engines.base import Engine, groups
from marft_agents.models.policy import LaMASPolicy
from marft_agents.models.sampling import Generation, Request, Sampling


def episode_seed(seed: int, update: int, episode: int) -> int:
    """The sampling seed of one episode of one update: a hash of the three numbers (NumPy's SeedSequence)."""
    return int(np.random.SeedSequence([seed, update, episode]).generate_state(1, np.uint64)[0] >> 1)


class EpisodeSeededEngine(Engine):
    """The hf engine, sampling each request with its episode's generator (:meth:`seed_episodes` first)."""

    name = "hf"

    def __init__(self, policy: LaMASPolicy):
        super().__init__()
        self.policy = policy
        self.generators: dict[int, torch.Generator] = {}
        """Episode index -> its generator, for the episodes being played."""

    def seed_episodes(self, seeds: dict[int, int]) -> None:
        """Fresh generators for the episodes about to be played: episode index -> seed."""
        # on the model's device: torch.rand draws with a generator of the device it fills
        self.generators = {e: torch.Generator(self.policy.device).manual_seed(s) for e, s in seeds.items()}

    def generate(self, requests: Sequence[Request], sampling: Sampling) -> Generation:
        responses: list[list[int]] = [[] for _ in requests]
        token_logps: list[torch.Tensor] = [None] * len(requests)  # every request's adapter group fills its slot
        texts: list[str] = [""] * len(requests)
        for (adapter, own), indices in groups(requests, sampling).items():
            prompts = [requests[i].prompt for i in indices]
            gen = self.policy.generate(prompts, adapter, own, generators=self._generators(requests, indices, own))
            self.calls += 1
            for k, i in enumerate(indices):
                responses[i], token_logps[i], texts[i] = gen.responses[k], gen.token_logps[k], gen.texts[k]
        return Generation(responses=responses, token_logps=token_logps, texts=texts)

    def _generators(
        self, requests: Sequence[Request], indices: list[int], own: Sampling
    ) -> list[torch.Generator] | None:
        """The generators of one group's episodes, in its order; None when greedy (nothing to draw)."""
        if own.temperature == 0:
            return None
        try:
            return [self.generators[requests[i].episode] for i in indices]
        except KeyError as err:
            raise KeyError(f"episode {err.args[0]} has no sampling generator: call seed_episodes first") from None

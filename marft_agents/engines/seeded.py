"""Per-episode sampling: each episode draws its tokens from its own generator, seeded from the episode.

In one process the rollout samples every token from torch's global generator, so what an episode
draws depends on which episodes were generated before it and beside it. Rollout workers must not
depend on that: a worker that is restarted plays its episodes again, and which worker plays an
episode must not change it. :class:`EpisodeSeededEngine` gives every episode a ``torch.Generator``
seeded from ``(run seed, update, episode index)`` (:func:`episode_seed`) and draws each row's next
token with its episode's generator (:class:`EpisodeSampler`), only while the row is still
generating, so an episode's draws do not depend on how long the other rows of a batch run.

Behaviour log-probs are unchanged: they come from the raw logits, ``softmax(logits / T)``, the
distribution the sampler draws from. Greedy requests (evaluation) draw nothing. Requests are
grouped by adapter and sampling as the hf engine groups them (an agent's own temperature or token
limit: a call of its own).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from transformers import LogitsProcessor, LogitsProcessorList

from marft_agents.engines.base import Engine, groups
from marft_agents.models.policy import LaMASPolicy
from marft_agents.models.sampling import Generation, Request, Sampling


def episode_seed(seed: int, update: int, episode: int) -> int:
    """The sampling seed of one episode of one update: a hash of the three numbers (NumPy's SeedSequence)."""
    return int(np.random.SeedSequence([seed, update, episode]).generate_state(1, np.uint64)[0] >> 1)


class EpisodeSampler(LogitsProcessor):
    """Draws each row's next token from ``softmax(logits / T)`` with that row's own generator.

    It returns scores that put all the mass on the drawn token, so ``generate``'s own draw (from
    torch's global generator) can only pick it. Rows that produced the end-of-turn token draw nothing.
    """

    def __init__(self, generators: Sequence[torch.Generator], temperature: float, prompt_width: int, eos_token_id: int):
        self.generators = list(generators)
        self.temperature = temperature
        self.prompt_width = prompt_width
        self.eos_token_id = eos_token_id

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        # input_ids (B, W + t): the left-padded prompts and the t tokens generated so far; scores (B, V) raw logits
        done = (input_ids[:, self.prompt_width :] == self.eos_token_id).any(1)  # (B,)
        probs = torch.softmax(scores.float() / self.temperature, dim=-1)  # (B, V)
        forced = torch.full_like(scores, float("-inf"))  # (B, V)
        for b, generator in enumerate(self.generators):
            token = 0 if done[b] else int(torch.multinomial(probs[b], 1, generator=generator))
            forced[b, token] = 0.0  # a finished row's token is replaced by padding anyway
        return forced


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
        # on the model's device: torch.multinomial draws with a generator of the probabilities' device
        self.generators = {e: torch.Generator(self.policy.device).manual_seed(s) for e, s in seeds.items()}

    def generate(self, requests: Sequence[Request], sampling: Sampling) -> Generation:
        responses: list[list[int]] = [[] for _ in requests]
        token_logps: list[torch.Tensor] = [None] * len(requests)  # every request's adapter group fills its slot
        texts: list[str] = [""] * len(requests)
        for (adapter, own), indices in groups(requests, sampling).items():
            prompts = [requests[i].prompt for i in indices]
            sampler = self._sampler(requests, indices, own, self.policy.eos_token_id_of(adapter))
            gen = self.policy.generate(prompts, adapter, own, logits_processor=sampler)
            self.calls += 1
            for k, i in enumerate(indices):
                responses[i], token_logps[i], texts[i] = gen.responses[k], gen.token_logps[k], gen.texts[k]
        return Generation(responses=responses, token_logps=token_logps, texts=texts)

    def _sampler(
        self, requests: Sequence[Request], indices: list[int], own: Sampling, eos_token_id: int
    ) -> LogitsProcessorList | None:
        """The :class:`EpisodeSampler` of one group's episodes (``eos_token_id``: the end of its adapter's turns); None
        when greedy (nothing to draw: the hf engine's own path)."""
        if own.temperature == 0:
            return None
        try:
            generators = [self.generators[requests[i].episode] for i in indices]
        except KeyError as err:
            raise KeyError(f"episode {err.args[0]} has no sampling generator: call seed_episodes first") from None
        width = max(len(requests[i].prompt) for i in indices)
        return LogitsProcessorList([EpisodeSampler(generators, own.temperature, width, eos_token_id)])

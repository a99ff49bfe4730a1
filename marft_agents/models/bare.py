"""A causal LM without adapters, in the shape an engine takes a policy (``marft pretrain``'s evaluations).

:class:`ModelAsPolicy` answers every agent with the one model being pre-trained, so the held-out
evaluations (:mod:`marft_agents.pretraining.sft_eval`) play the envs through the same rollout engine
and the same hf engine (:class:`marft_agents.engines.hf.HFEngine`) as ``marft eval``; its
:meth:`~ModelAsPolicy.generate` is the model layer's generation, :func:`marft_agents.models.lm.generate`.
"""

from __future__ import annotations

from collections import defaultdict

import torch

from marft_agents.models import lm
from marft_agents.models.chat import prompt_ids
from marft_agents.models.sampling import Generation, Sampling


class ModelAsPolicy:
    """A causal LM (no adapters) in the shape the rollout engine takes a policy: every agent uses that one model."""

    is_team = False
    """One model for every agent (a :class:`~marft_agents.models.protocol.RolloutPolicy`)."""

    def __init__(self, model, tokenizer, batch_size: int = 256):
        self.model = model
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        """Prompts per ``generate`` call (a layer of more prompts is generated in slices of this many)."""
        self.adapter_of = defaultdict(lambda: "model")  # one "adapter" for every agent

    @property
    def device(self) -> torch.device:
        """Where the model's weights live."""
        return lm.device_of(self.model)

    def prompt(self, observation: dict, agent: str | None = None) -> list[int]:
        """Token ids of the chat prompt for one env observation (every agent's alike: ``agent`` matters to a team,
        ``models/team.py``)."""
        return prompt_ids(self.tokenizer, observation)

    def generate(
        self, prompts: list[list[int]], adapter: str, sampling: Sampling, *, merge: bool = False
    ) -> Generation:
        """Responses to ``prompts`` in slices of ``batch_size``; no log-probs (evaluation needs none).

        ``merge`` changes nothing: the model has no adapter to merge."""
        responses = []
        for start in range(0, len(prompts), self.batch_size):
            part, _ = lm.generate(
                self.model,
                prompts[start : start + self.batch_size],
                temperature=sampling.temperature,
                max_new_tokens=sampling.max_new_tokens,
                pad_token_id=self.tokenizer.pad_token_id,
                eos_token_id=self.tokenizer.eos_token_id,
                logprobs=False,
            )
            responses += part
        return Generation(
            responses=responses,
            token_logps=[torch.empty(0, device=self.device) for _ in responses],
            texts=self.tokenizer.batch_decode(responses, skip_special_tokens=True),
        )

"""The Hugging Face engine (the default): ``LaMASPolicy.generate``, one batched call per adapter of a layer.

It samples with the policy's own model, so the weights it serves are always the trained ones and
:meth:`~marft_agents.engines.base.Engine.sync` only records the version. Requests are grouped by
adapter and sampling (agents with their own temperature or token limit: one call each) in the order
each group first appears in the layer, and each group keeps the order of its requests: with one
sampling for every agent, the same calls, on the same batches, in the same order as the rollout
engine made before engines existed, so every random draw and every metric is unchanged. With ``merge_lora`` each
group's adapter is merged into a copy of the base's weights for the call: one matmul per layer
instead of three, at float rounding's distance from the unmerged numbers (off by default).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from marft_agents.engines.base import Engine, groups
from marft_agents.models.protocol import RolloutPolicy
from marft_agents.models.sampling import Generation, Request, Sampling


class HFEngine(Engine):
    """Generation through the policy's model with ``transformers``' ``generate``."""

    name = "hf"

    def __init__(self, policy: RolloutPolicy, *, merge_lora: bool = False):
        super().__init__()
        self.policy = policy
        self.merge_lora = merge_lora
        """Generate with each adapter merged into the base's weights (``LaMASPolicy.merged``)."""

    def generate(self, requests: Sequence[Request], sampling: Sampling) -> Generation:
        responses: list[list[int]] = [[] for _ in requests]
        token_logps: list[torch.Tensor] = [None] * len(requests)  # every request's adapter group fills its slot
        texts: list[str] = ["" for _ in requests]
        for (adapter, own), indices in groups(requests, sampling).items():
            prompts = [requests[i].prompt for i in indices]
            gen = self.policy.generate(prompts, adapter, own, merge=self.merge_lora)
            self.calls += 1
            for k, i in enumerate(indices):
                responses[i], token_logps[i], texts[i] = gen.responses[k], gen.token_logps[k], gen.texts[k]
        return Generation(responses=responses, token_logps=token_logps, texts=texts)

"""The TRL rollout's engine: a model sampled with a ``GenerationConfig`` as it stands (a ``GRPOTrainer``'s).

:class:`marft_agents.rollout.trl.MarftRollout` plays marft envs for TRL's ``GRPOTrainer``, which
samples with its own settings (temperature, top-k, top-p, ...: ``trainer.generation_config``) and
expects behaviour log-probs under the distribution that actually sampled. So this engine keeps every
knob of the config it is given and takes the log-probs from ``output_scores``: the processed logits
each token was drawn from (after temperature, top-k, top-p), not the raw ``softmax(logits / T)`` of
the other engines. The model has no adapters; every request is answered by it, whatever adapter it
names, in one batched call per layer. Nothing here imports TRL: the rollout unwraps the trainer's
model (``trl.models.unwrap_model_for_generation``) and hands it over.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from typing import Any

import torch

from marft_agents.engines.base import Engine
from marft_agents.models.sampling import Generation, Request, Sampling


def config_sampling(config: Any) -> Sampling:
    """The :class:`Sampling` a ``GenerationConfig`` stands for: its temperature (1.0 when unset) and
    ``max_new_tokens``."""
    temperature = config.temperature if config.temperature is not None else 1.0
    return Sampling(temperature=float(temperature), max_new_tokens=int(config.max_new_tokens))


class TRLEngine(Engine):
    """Generation with a bare causal LM under a fixed ``GenerationConfig``, log-probs from the processed scores."""

    name = "trl"

    def __init__(
        self, model: Any, tokenizer: Any, generation_config: Any, eos_token_ids: Iterable[int], device: Any = None
    ):
        super().__init__()
        self.model = model
        self.tokenizer = tokenizer
        self.config = copy.deepcopy(generation_config)  # the caller's settings, plus the scores
        self.config.output_scores, self.config.return_dict_in_generate = True, True
        self.eos_token_ids = set(eos_token_ids)
        """A response ends at the first of these (kept)."""
        self.device = device
        """Where the prompts go (the trainer's ``accelerator.device``); None: left where torch creates them."""
        self.sampling = config_sampling(generation_config)
        """The only :class:`Sampling` this engine serves: the config's own."""

    def generate(self, requests: Sequence[Request], sampling: Sampling) -> Generation:
        if sampling != self.sampling or any(r.sampling not in (None, self.sampling) for r in requests):
            other = next(
                (s for s in [sampling, *(r.sampling for r in requests)] if s not in (None, self.sampling)), sampling
            )
            raise ValueError(
                f"TRLEngine samples with its generation config's {self.sampling}, not {other}: pass engine.sampling"
            )
        prompts = [r.prompt for r in requests]
        width = max(map(len, prompts))
        pad = self.tokenizer.pad_token_id
        input_ids = torch.tensor(
            [[pad] * (width - len(p)) + p for p in prompts], device=self.device
        )  # (B, P), left-padded
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=self.device)  # (B, P)
        with torch.no_grad():
            out = self.model.generate(input_ids=input_ids, attention_mask=mask, generation_config=self.config)
        self.calls += 1
        completion = out.sequences[:, width:]  # (B, T)
        # The scores are the processed logits the tokens were sampled from (after temperature, top-k, top-p).
        logps = torch.stack(out.scores, dim=1).float().log_softmax(-1)  # (B, T, V)
        logps = logps.gather(-1, completion.unsqueeze(-1)).squeeze(-1)  # (B, T)
        responses, token_logps, texts = [], [], []
        for row in range(len(prompts)):
            ids = completion[row].tolist()
            end = next(
                (t + 1 for t, tok in enumerate(ids) if tok in self.eos_token_ids), len(ids)
            )  # keep the first EOS
            responses.append(ids[:end])
            token_logps.append(logps[row, :end])
            texts.append(self.tokenizer.decode(ids[:end], skip_special_tokens=True))
        return Generation(responses=responses, token_logps=token_logps, texts=texts)

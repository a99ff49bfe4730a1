"""SFT data for the tiny model, observed through the real envs: examples, batches, the BPE's corpus.

The model is trained in the roles it will play under RL, on prompts built by the real envs, so the
RL policy sees exactly the token sequences it was trained on:

- ``reasoner`` of ``marft/MathChain-v0``: ``env.observe("reasoner_0")`` -> the problem's worked
  solution (``23+15=38`` / ``38-7=31``);
- ``actor`` of ``marft/MathChain-v0``: after the reasoner stepped with that solution,
  ``env.observe("actor_0")`` -> ``\\boxed{31}`` (the last value of the steps, e.g. ``\\boxed{4/3}``);
- ``solver`` of ``marft/MathSolo-v0``: ``env.observe("solver_0")`` -> the steps, a newline, the box.

Prompt ids come from :func:`marft_agents.models.chat.prompt_ids` (the tokenizer's chat template); the target
is the response ids plus the end-of-turn token. Problems come from the train split only.

**The habit RL has to unlearn.** With ``unfinished_rate`` > 0, that fraction of the reasoner's
multi-step solutions is cut short after a random number of steps (``23+15=38`` alone for the two
steps above). The model then often stops its reasoning early, as real LLMs do when they answer before
they have finished working: the actor boxes the last value it sees, which for a cut solution is an
intermediate result, so the team is wrong. Nothing else changes — the arithmetic it learns is the
same, and the actor's and solver's targets stay whole — so an outcome reward can find what to fix: to
finish the work (``docs/agents.md``, "The embedded model").
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from marft_agents.models import lm
from marft_agents.models.chat import messages, prompt_ids
from marft_agents.pretraining.pretrain_config import PretrainConfig
from marft_envs.tasks.math.base import load_profile
from marft_envs.tasks.math.chain import MathChain
from marft_envs.tasks.math.problems import Problem
from marft_envs.tasks.math.solo import MathSolo
from marft_envs.tasks.math.synthetic import LEVELS, SyntheticMath

ROLES = ("reasoner", "actor", "solver")
_LAST_VALUE = re.compile(r"=\s*([^=\n]+?)\s*$")


def last_value(steps: str) -> str | None:
    """The value after the last ``=`` of the last line that has one: ``"2*8=16\\n16+24=40"`` -> ``"40"``."""
    for line in reversed(steps.splitlines()):
        match = _LAST_VALUE.search(line)
        if match:
            return match.group(1)
    return None


def unfinished(steps: str, rng: np.random.Generator) -> str:
    """``steps`` cut after a random number of its lines (at least one, not all); one-line steps stay whole."""
    lines = steps.splitlines()
    if len(lines) < 2:
        return steps
    return "\n".join(lines[: rng.integers(1, len(lines))])


def role_examples(
    problem: Problem,
    chain: MathChain,
    solo: MathSolo,
    roles: Sequence[str],
    *,
    unfinished_rate: float = 0.0,
    rng: np.random.Generator | None = None,
) -> list[tuple[dict, str]]:
    """``(observation, target text)`` for ``problem`` in each of ``roles``, observed through the envs.

    With ``unfinished_rate`` > 0 the reasoner's target is, that often, its steps cut short
    (:func:`unfinished`); the actor's and solver's targets always use the whole solution.
    """
    if unfinished_rate > 0 and rng is None:
        raise ValueError("role_examples: unfinished_rate > 0 needs an rng to draw which solutions to cut")
    steps = problem.solution
    box = f"\\boxed{{{last_value(steps)}}}"
    out = []
    if "reasoner" in roles or "actor" in roles:
        chain.reset(options={"problem": problem})
        if "reasoner" in roles:
            cut = unfinished_rate > 0 and rng.random() < unfinished_rate
            out.append((chain.observe("reasoner_0"), unfinished(steps, rng) if cut else steps))
        if "actor" in roles:
            chain.step({"reasoner_0": steps})
            out.append((chain.observe("actor_0"), box))
    if "solver" in roles:
        solo.reset(options={"problem": problem})
        out.append((solo.observe("solver_0"), f"{steps}\n{box}"))
    return out


class SFTData:
    """An endless stream of length-sorted, right-padded SFT batches drawn from the train split."""

    def __init__(self, tokenizer, config: PretrainConfig, seed: int):
        self.tokenizer = tokenizer
        self.config = config
        self.rng = np.random.default_rng(seed)
        levels = [lvl for lvl in LEVELS if config.level_weights.get(lvl, 0) > 0]
        if not levels:
            raise ValueError("level_weights gives every level weight 0; give at least one level a positive weight")
        w = np.array([config.level_weights[lvl] for lvl in levels], dtype=float)
        self.levels, self.level_p = levels, w / w.sum()
        self.sources = {lvl: SyntheticMath(levels=(lvl,), split="train") for lvl in levels}
        roles = [r for r in ROLES if config.role_weights.get(r, 0) > 0]
        if not roles:
            raise ValueError(f"role_weights gives every role weight 0; use some of {ROLES}")
        w = np.array([config.role_weights[r] for r in roles], dtype=float)
        self.roles, self.role_p = roles, w / w.sum()
        self.chain, self.solo = MathChain(split="train"), MathSolo(split="train")
        self.examples_seen = 0
        self.checked = False

    def examples(self, n_problems: int) -> list[tuple[str, list[int], list[int]]]:
        """``(role, prompt ids, response ids + eos)`` for ``n_problems`` fresh problems, one role each."""
        obs, targets, roles = [], [], []
        for _ in range(n_problems):
            level = self.levels[self.rng.choice(len(self.levels), p=self.level_p)]
            problem = self.sources[level].sample(self.rng)
            role = self.roles[self.rng.choice(len(self.roles), p=self.role_p)]
            for o, t in role_examples(
                problem, self.chain, self.solo, [role], unfinished_rate=self.config.unfinished_rate, rng=self.rng
            ):
                obs.append(o)
                targets.append(t)
                roles.append(role)
        tok = self.tokenizer
        # Batch-encode the rendered template: the same ids as prompt_ids (checked once below), much faster.
        rendered = [tok.apply_chat_template(messages(o), add_generation_prompt=True, tokenize=False) for o in obs]
        prompts = tok(rendered, add_special_tokens=False)["input_ids"]
        responses = tok(targets, add_special_tokens=False)["input_ids"]
        if not self.checked:
            for o, p in zip(obs[:8], prompts):
                if prompt_ids(tok, o) != p:
                    raise AssertionError("batch-encoded prompts differ from chat.prompt_ids; fix SFTData.examples")
            self.checked = True
        self.examples_seen += len(obs)
        return [(role, p, r + [tok.eos_token_id]) for role, p, r in zip(roles, prompts, responses)]

    def __iter__(self) -> Iterator[Batch]:
        bs = self.config.batch_size
        while True:
            chunk = self.examples(self.config.chunk_problems)
            # One role per batch, so its examples share the role prompt as a prefix.
            order = self.rng.permutation(len(chunk))
            if self.config.sort_by_length:
                chunk.sort(key=lambda ex: (ex[0], len(ex[1]) + len(ex[2])))
            else:
                chunk = [chunk[i] for i in order]
                chunk.sort(key=lambda ex: ex[0])  # stable: random order within a role
            batches = [chunk[i : i + bs] for i in range(0, len(chunk) - bs + 1, bs)]
            for k in self.rng.permutation(len(batches)):
                yield collate([(p, r) for _, p, r in batches[k]], self.tokenizer.pad_token_id)


@dataclass
class Batch:
    """Right-padded SFT sequences after a prefix that every sequence of the batch shares."""

    prefix: torch.Tensor
    """The shared first tokens (the role prompt), ``(P,)``; may be empty."""
    input_ids: torch.Tensor
    """The rest of each sequence, right-padded, ``(B, S)``."""
    attention_mask: torch.Tensor
    """1 on real tokens of ``input_ids``, ``(B, S)``."""
    labels: torch.Tensor
    """Response tokens, -100 elsewhere (prompt and padding), ``(B, S)``."""


def collate(batch: Sequence[tuple[list[int], list[int]]], pad_id: int, min_prefix: int = lm.MIN_SHARED_PREFIX) -> Batch:
    """Split off the prompts' longest common prefix (kept out of the response), right-pad the rest."""
    prompts = [p for p, _ in batch]
    n = lm.common_prefix_length(prompts, min_prefix)  # the token before the response stays in the rest
    width = max(len(p) + len(r) for p, r in batch) - n
    ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    labels = torch.full((len(batch), width), -100, dtype=torch.long)
    for i, (p, r) in enumerate(batch):
        seq = (p + r)[n:]
        ids[i, : len(seq)] = torch.tensor(seq)
        mask[i, : len(seq)] = 1
        labels[i, len(p) - n : len(seq)] = torch.tensor(r)
    return Batch(torch.tensor(prompts[0][:n], dtype=torch.long), ids, mask, labels)


def tokenizer_corpus(n_problems: int, seed: int) -> Iterator[str]:
    """Texts the BPE learns from: every role prompt, and observations and targets of train problems."""
    yield from load_profile("default")["roles"].values()
    chain, solo = MathChain(split="train"), MathSolo(split="train")
    source = SyntheticMath(split="train")
    rng = np.random.default_rng(seed)
    for _ in range(n_problems):
        for obs, target in role_examples(source.sample(rng), chain, solo, ROLES):
            yield obs["instructions"]
            yield obs["text"]
            yield target

"""Supervised pre-training of the embedded tiny model on the synthetic MATH tasks (``marft pretrain``).

The model is trained in the roles it will play under RL, on prompts built by the real envs, so the
RL policy sees exactly the token sequences it was trained on:

- ``reasoner`` of ``marft/MathChain-v0``: ``env.observe("reasoner_0")`` -> the problem's worked
  solution (``23+15=38`` / ``38-7=31``);
- ``actor`` of ``marft/MathChain-v0``: after the reasoner stepped with that solution,
  ``env.observe("actor_0")`` -> ``\\boxed{31}`` (the last value of the steps, e.g. ``\\boxed{4/3}``);
- ``solver`` of ``marft/MathSolo-v0``: ``env.observe("solver_0")`` -> the steps, a newline, the box.

Prompt ids come from :func:`marft_agents.chat.prompt_ids` (the tokenizer's chat template); the target
is the response ids plus the end-of-turn token, and the loss covers the response tokens only (on
these machines answer-only loss beat all-token loss, 89 % vs 76 % on a probe task). Problems come
from the train split only; :func:`evaluate_chain` measures the 2-agent chain on the test split.

**The habit RL has to unlearn.** With ``unfinished_rate`` > 0, that fraction of the reasoner's
multi-step solutions is cut short after a random number of steps (``23+15=38`` alone for the two
steps above). The model then often stops its reasoning early, as real LLMs do when they answer before
they have finished working: the actor boxes the last value it sees, which for a cut solution is an
intermediate result, so the team is wrong. Nothing else changes — the arithmetic it learns is the
same, and the actor's and solver's targets stay whole — so an outcome reward can find what to fix: to
finish the work. That is the headroom the demo's MARFT run is meant to find (``docs/agents.md``
measures it, with the reasoner's response length before and after). The shipped checkpoint was made
in two runs, the second continuing the first (``init``; the shipped first run is the checkpoint
that ``marft_agents/assets/tiny-math`` held at commit ``ccf4c4e``, which the second run replaced):

    marft pretrain --out stage1 --seed 0 --role-weights 1,0.3,1 --threads 2 --seconds 300 --eval-every 60
    marft pretrain --init stage1 --out tiny-math --seed 0 --role-weights 1,0.3,1 --unfinished-rate 0.6 \
        --max-steps 300 --lr 5e-4 --warmup-steps 10 --threads 2

The run has two budgets, optimizer steps (``max_steps``) and wall-clock time (``seconds``), and
ends at whichever runs out first; the learning rate warms up, then follows a cosine curve over the
budget that binds. The defaults (2,000 steps of 32 sequences, at most 330 s) fit a quiet 2-core
CPU: there the steps bind. On a slower or busier machine the time binds and the model ends less
trained. The seed fixes the tokenizer, the initial weights and the data, but a from-scratch run is
not bit-reproducible, and its accuracy is fragile: rerunning the first command above on 2026-11-30
gave the same loss at step 50, then drifted, and ended at 17 % greedy chain accuracy where the
shipped model's first run had reached 36.5 %. (A continued run, the second command, did repeat bit
for bit, with 1 or 2 threads.) The shipped checkpoint's ``pretrain.json`` records how it was made
and how it scored, its first run included (``init_pretrain``).

    python -m marft_agents.models.pretrain --out runs/tiny --seed 0
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import re
import time
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm
from transformers import DynamicCache, GenerationConfig

from marft_agents.chat import messages, prompt_ids
from marft_agents.models.tiny import DEFAULT_VOCAB_SIZE, build_model, build_tokenizer, count_parameters
from marft_agents.policy import EMBEDDED, embedded_model_path, load_base
from marft_envs.rewards.math import answers_match
from marft_envs.tasks.math.base import load_profile
from marft_envs.tasks.math.chain import MathChain
from marft_envs.tasks.math.problems import Problem
from marft_envs.tasks.math.solo import MathSolo
from marft_envs.tasks.math.synthetic import LEVELS, SyntheticMath

ROLES = ("reasoner", "actor", "solver")
_LAST_VALUE = re.compile(r"=\s*([^=\n]+?)\s*$")


_BUILD_FIELDS = ("vocab_size", "tokenizer_problems", "hidden_size", "num_layers", "num_heads",
                 "intermediate_size", "max_position_embeddings")
"""Settings that shape a new model and tokenizer; fixed by the checkpoint when ``init`` is set."""


@dataclass
class PretrainConfig:
    """Settings of one pre-training run (saved to ``pretrain.json``)."""

    init: str | None = None
    """Continue from this checkpoint (``embedded``, a folder or a Hub id; its tokenizer too) instead of building one."""
    max_steps: int | None = 2000
    """Optimizer steps; None to train for ``seconds`` only."""
    seconds: float = 330.0
    """Wall-clock cap of the training loop (data generation included, evaluation excluded)."""
    seed: int = 0
    """Seeds the problems drawn, the batch order and (without ``init``) the tokenizer's corpus and the initial weights."""
    lr: float = 2e-3
    """Peak AdamW learning rate."""
    min_lr_ratio: float = 0.1
    """The cosine schedule ends at ``lr * min_lr_ratio``."""
    warmup_steps: int = 50
    """Linear warm-up from 0 to ``lr``."""
    weight_decay: float = 0.01
    """AdamW weight decay."""
    batch_size: int = 32
    """Sequences (prompt + response, right-padded) per optimizer step."""
    grad_clip: float = 1.0
    """Global gradient-norm clip."""
    unfinished_rate: float = 0.0
    """Fraction of the reasoner's multi-step solutions cut short after a random number of steps."""
    role_weights: dict[str, float] = field(default_factory=lambda: {"reasoner": 1.0, "actor": 1.0, "solver": 1.0})
    """Relative frequency of SFT examples per role (``reasoner``/``actor`` of the chain, ``solver`` of solo)."""
    level_weights: dict[int, float] = field(default_factory=lambda: dict.fromkeys(LEVELS, 1.0))
    """Relative frequency of problem levels (1-4) in the SFT data."""
    chunk_problems: int = 512
    """Problems drawn at a time; their examples are grouped into batches by role."""
    sort_by_length: bool = False
    """Also sort each role's examples by length before batching (less padding, less varied batches)."""
    vocab_size: int = DEFAULT_VOCAB_SIZE
    """Upper bound on the BPE vocabulary."""
    tokenizer_problems: int = 3000
    """Train-split problems whose texts (observations, role prompts, solutions) train the BPE."""
    hidden_size: int = 128
    num_layers: int = 4
    num_heads: int = 4
    intermediate_size: int = 512
    max_position_embeddings: int = 512
    eval_n: int = 200
    """Held-out problems for the final evaluation (0 skips it)."""
    eval_samples: int = 4
    """Samples per problem at temperature 1 in the final evaluation (pass@1 and pass@k)."""
    eval_every: float = 0.0
    """Also evaluate the greedy chain on ``eval_every_n`` problems every this many training seconds (0: never)."""
    eval_every_n: int = 100
    """Held-out problems for each periodic evaluation."""
    threads: int | None = None
    """``torch.set_num_threads`` for the run; None leaves torch's default."""


# ---- SFT data from the real envs ------------------------------------------------------------------


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
    return "\n".join(lines[:rng.integers(1, len(lines))])


def role_examples(problem: Problem, chain: MathChain, solo: MathSolo, roles: Sequence[str], *,
                  unfinished_rate: float = 0.0, rng: np.random.Generator | None = None) -> list[tuple[dict, str]]:
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
            for o, t in role_examples(problem, self.chain, self.solo, [role],
                                      unfinished_rate=self.config.unfinished_rate, rng=self.rng):
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
            batches = [chunk[i:i + bs] for i in range(0, len(chunk) - bs + 1, bs)]
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


def collate(batch: Sequence[tuple[list[int], list[int]]], pad_id: int, min_prefix: int = 8) -> Batch:
    """Split off the prompts' longest common prefix (kept out of the response), right-pad the rest."""
    prompts = [p for p, _ in batch]
    limit = min(len(p) for p in prompts) - 1  # the token before the response must stay in the rest
    n = 0
    while n < limit and all(p[n] == prompts[0][n] for p in prompts):
        n += 1
    if n < min_prefix:
        n = 0
    width = max(len(p) + len(r) for p, r in batch) - n
    ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    labels = torch.full((len(batch), width), -100, dtype=torch.long)
    for i, (p, r) in enumerate(batch):
        seq = (p + r)[n:]
        ids[i, :len(seq)] = torch.tensor(seq)
        mask[i, :len(seq)] = 1
        labels[i, len(p) - n:len(seq)] = torch.tensor(r)
    return Batch(torch.tensor(prompts[0][:n], dtype=torch.long), ids, mask, labels)


def sft_loss(model, batch: Batch) -> torch.Tensor:
    """Mean cross-entropy on the response tokens.

    The shared prefix (the role prompt, ~40 % of a sequence) runs once and its keys/values are
    broadcast over the batch, and the output layer runs only where a response token is predicted:
    the same loss and gradients as the plain causal-LM loss on full sequences, for about half the compute.
    """
    B, S = batch.input_ids.shape
    P = len(batch.prefix)
    inputs: dict = {"attention_mask": batch.attention_mask}
    if P:
        # transformers >= 5 calls the KV cache `cache`; earlier versions `past_key_values`.
        name = "cache" if "cache" in inspect.signature(model.model.forward).parameters else "past_key_values"
        out = model.model(input_ids=batch.prefix[None], use_cache=True)  # the prefix, once
        cache = out[name] if name in out else out["past_key_values"]
        pairs = ([(layer.keys, layer.values) for layer in cache.layers] if hasattr(cache, "layers")
                 else list(zip(cache.key_cache, cache.value_cache)))
        inputs[name] = DynamicCache([(k.expand(B, -1, -1, -1), v.expand(B, -1, -1, -1)) for k, v in pairs])
        inputs["attention_mask"] = torch.cat(
            [torch.ones(B, P, dtype=batch.attention_mask.dtype), batch.attention_mask], dim=1)  # (B, P+S)
        inputs["position_ids"] = torch.arange(P, P + S).expand(B, S)
    hidden = model.model(input_ids=batch.input_ids, use_cache=False, **inputs).last_hidden_state  # (B, S, d)
    targets = batch.labels[:, 1:]  # (B, S-1): position t predicts token t+1
    where = targets != -100
    logits = model.lm_head(hidden[:, :-1][where])  # (n_response_tokens, V)
    return torch.nn.functional.cross_entropy(logits.float(), targets[where])


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


# ---- evaluation -----------------------------------------------------------------------------------


@torch.no_grad()
def generate(model, tokenizer, prompts: list[list[int]], *, temperature: float = 0.0,
             max_new_tokens: int = 48, batch_size: int = 256) -> list[str]:
    """Batched, left-padded generation; greedy when ``temperature`` is 0. Returns decoded responses."""
    greedy = temperature == 0
    config = GenerationConfig(
        max_new_tokens=max_new_tokens, do_sample=not greedy, temperature=None if greedy else temperature,
        top_k=None, top_p=None, min_p=None, typical_p=None, repetition_penalty=None,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, bos_token_id=None,
    )
    texts = []
    for start in range(0, len(prompts), batch_size):
        part = prompts[start:start + batch_size]
        width = max(len(p) for p in part)
        ids = torch.full((len(part), width), tokenizer.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(part), width), dtype=torch.long)
        for i, p in enumerate(part):
            ids[i, width - len(p):] = torch.tensor(p)
            mask[i, width - len(p):] = 1
        out = model.generate(input_ids=ids, attention_mask=mask, generation_config=config)  # (B, width + L)
        for row in out[:, width:].tolist():
            if tokenizer.eos_token_id in row:
                row = row[:row.index(tokenizer.eos_token_id)]
            texts.append(tokenizer.decode(row, skip_special_tokens=True))
    return texts


def _rate(xs: Sequence[bool]) -> float | None:
    return round(float(np.mean(xs)), 4) if len(xs) else None


def run_chains(model, tokenizer, problems: Sequence[Problem], *, temperature: float = 0.0,
               max_new_tokens: int = 48) -> list[dict]:
    """Play one 2-agent MathChain episode per problem (batched per agent); one record per episode."""
    envs = [MathChain(split="test") for _ in problems]
    for env, p in zip(envs, problems):
        env.reset(options={"problem": p})
    records = [{"level": p.level, "gold": p.answer, "gold_steps": len(p.solution.splitlines())} for p in problems]
    for agent in ("reasoner_0", "actor_0"):
        prompts = [prompt_ids(tokenizer, env.observe(agent)) for env in envs]
        texts = generate(model, tokenizer, prompts, temperature=temperature, max_new_tokens=max_new_tokens)
        for env, rec, text in zip(envs, records, texts):
            rec[agent] = text
            result = env.step({agent: text})
            if result is not None:
                rec["team"] = bool(result.infos["actor_0"]["solved"])
    for rec in records:
        value = last_value(rec["reasoner_0"])
        rec["reasoner_right"] = value is not None and answers_match(value, rec["gold"])
        rec["reasoner_finished"] = len(rec["reasoner_0"].splitlines()) >= rec.pop("gold_steps")
    return records


def summarize_chains(records: Sequence[dict]) -> dict:
    """Team accuracy (overall and per level), the reasoner's own accuracy and how often it finished its
    steps (and the team's accuracy then), the actor's accuracy given its parent."""
    by_level = defaultdict(list)
    for r in records:
        by_level[r["level"]].append(r["team"])
    return {
        "n": len(records),
        "team_accuracy": _rate([r["team"] for r in records]),
        "team_accuracy_by_level": {str(k): _rate(v) for k, v in sorted(by_level.items())},
        "reasoner_accuracy": _rate([r["reasoner_right"] for r in records]),
        # "finished": the reasoner wrote at least as many lines as the worked solution has steps
        "reasoner_finished": _rate([r["reasoner_finished"] for r in records]),
        "accuracy_when_finished": _rate([r["team"] for r in records if r["reasoner_finished"]]),
        "actor_accuracy_given_reasoner_right": _rate([r["team"] for r in records if r["reasoner_right"]]),
        "actor_accuracy_given_reasoner_wrong": _rate([r["team"] for r in records if not r["reasoner_right"]]),
    }


def evaluate_chain(model, tokenizer, n: int = 200, seed: int = 0, *, temperature: float = 0.0,
                   samples: int = 1, max_new_tokens: int = 48) -> dict:
    """The 2-agent MathChain on ``n`` held-out (test-split) problems: greedy by default.

    With ``temperature > 0`` and ``samples = k``, every problem is played ``k`` times: ``pass@1`` is
    the mean accuracy over all episodes, ``pass@k`` the fraction of problems solved at least once.
    """
    was_training = model.training
    model.eval()
    problems = SyntheticMath(split="test").heldout(n, seed)
    with torch.random.fork_rng():  # sampled evaluations are reproducible and leave the global RNG alone
        torch.manual_seed(seed)
        records = run_chains(model, tokenizer, [p for p in problems for _ in range(samples)],
                             temperature=temperature, max_new_tokens=max_new_tokens)
    model.train(was_training)
    out = summarize_chains(records)
    out["n"], out["episodes"], out["temperature"] = len(problems), len(records), temperature
    if samples > 1:
        solved = [any(r["team"] for r in records[i * samples:(i + 1) * samples]) for i in range(len(problems))]
        out["samples"] = samples
        out["pass@1"] = out["team_accuracy"]
        out[f"pass@{samples}"] = _rate(solved)
    out["examples"] = [{k: r[k] for k in ("gold", "reasoner_0", "actor_0", "team")} for r in records[:3]]
    return out


def evaluate_solo(model, tokenizer, n: int = 200, seed: int = 0, *, max_new_tokens: int = 48) -> dict:
    """Greedy accuracy of the single ``solver`` (MathSolo) on ``n`` held-out problems, overall and per level."""
    was_training = model.training
    model.eval()
    problems = SyntheticMath(split="test").heldout(n, seed)
    envs = [MathSolo(split="test") for _ in problems]
    prompts = []
    for env, p in zip(envs, problems):
        env.reset(options={"problem": p})
        prompts.append(prompt_ids(tokenizer, env.observe("solver_0")))
    texts = generate(model, tokenizer, prompts, max_new_tokens=max_new_tokens)
    model.train(was_training)
    by_level, solved = defaultdict(list), []
    for env, p, text in zip(envs, problems, texts):
        ok = bool(env.step({"solver_0": text}).infos["solver_0"]["solved"])
        solved.append(ok)
        by_level[p.level].append(ok)
    return {"n": len(problems), "accuracy": _rate(solved),
            "accuracy_by_level": {str(k): _rate(v) for k, v in sorted(by_level.items())}}


# ---- training -------------------------------------------------------------------------------------


def _progress(config: PretrainConfig, step: int, elapsed: float) -> float:
    """Fraction of the budget used: steps or seconds, whichever runs out first."""
    by_steps = step / config.max_steps if config.max_steps else 0.0
    return max(by_steps, elapsed / config.seconds)


def _lr_at(config: PretrainConfig, step: int, progress: float) -> float:
    """Linear warm-up over steps, then cosine from ``lr`` to ``lr * min_lr_ratio`` over ``progress`` in [0, 1]."""
    warm = min(1.0, (step + 1) / max(config.warmup_steps, 1))
    cosine = 0.5 * (1 + math.cos(math.pi * min(max(progress, 0.0), 1.0)))
    return config.lr * warm * (config.min_lr_ratio + (1 - config.min_lr_ratio) * cosine)


def train(model, tokenizer, config: PretrainConfig, *, progress_bar: bool = True) -> dict:
    """The SFT loop: AdamW, answer-only loss, warm-up + cosine over the time (or step) budget."""
    model.train()
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": config.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=config.lr, betas=(0.9, 0.95), eps=1e-8)
    data = SFTData(tokenizer, config, seed=config.seed + 1)
    bar = tqdm(total=100, unit="%", disable=not progress_bar, desc="pretrain", dynamic_ncols=True,
               bar_format="{l_bar}{bar}| {n:.0f}% [{elapsed}<{remaining}{postfix}]")
    start = time.perf_counter()
    step, tokens, response_tokens, ema, shown = 0, 0, 0, None, 0
    bar.set_postfix(step=0)
    history = []  # (step, seconds, smoothed loss), about every 50 steps
    evals = []  # periodic held-out checks; their time is not training time
    next_eval = config.eval_every if config.eval_every > 0 else math.inf
    for batch in data:
        elapsed = time.perf_counter() - start
        if elapsed >= next_eval:
            t = time.perf_counter()
            result = evaluate_chain(model, tokenizer, n=config.eval_every_n, seed=1)
            evals.append({"step": step, "seconds": round(elapsed, 1), "team_accuracy": result["team_accuracy"],
                          "reasoner_accuracy": result["reasoner_accuracy"],
                          "by_level": result["team_accuracy_by_level"]})
            bar.write(f"step {step} ({elapsed:.0f}s): team {result['team_accuracy']:.3f}, "
                      f"reasoner {result['reasoner_accuracy']:.3f}, by level {result['team_accuracy_by_level']}")
            start += time.perf_counter() - t
            next_eval += config.eval_every
            elapsed = time.perf_counter() - start
        progress = _progress(config, step, elapsed)
        if progress >= 1.0:
            break
        lr = _lr_at(config, step, progress)
        for group in opt.param_groups:
            group["lr"] = lr
        loss = sft_loss(model, batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        opt.step()
        step += 1
        tokens += int(batch.attention_mask.sum()) + len(batch.prefix) * len(batch.input_ids)
        response_tokens += int((batch.labels != -100).sum())
        value = loss.item()
        ema = value if ema is None else 0.98 * ema + 0.02 * value
        if step % 50 == 0:
            history.append([step, round(time.perf_counter() - start, 1), round(ema, 4)])
        now = min(100, int(100 * _progress(config, step, time.perf_counter() - start)))
        if now > shown:
            bar.update(now - shown)
            shown = now
            bar.set_postfix(loss=f"{ema:.3f}", lr=f"{lr:.1e}", step=step)
    bar.update(100 - shown)
    bar.close()
    seconds = time.perf_counter() - start
    model.eval()
    return {"steps": step, "train_seconds": round(seconds, 1), "examples": step * config.batch_size,
            "tokens": tokens, "response_tokens": response_tokens,
            "tokens_per_second": round(tokens / max(seconds, 1e-9)), "final_loss_ema": round(ema or float("nan"), 4),
            "loss_history": history, "periodic_evals": evals}


def pretrain(out_dir: str | Path, *, seconds: float = 330.0, seed: int = 0, progress_bar: bool = True,
             **overrides) -> dict:
    """Build the tokenizer and the tiny model, SFT them on the synthetic tasks, evaluate, save to ``out_dir``.

    ``overrides`` are :class:`PretrainConfig` fields (``lr``, ``batch_size``, ``level_weights``, ...).
    Writes ``config.json``, ``generation_config.json``, ``model.safetensors``, the tokenizer files and
    ``pretrain.json`` (settings, training statistics, held-out accuracies); returns that summary.
    """
    unknown = set(overrides) - set(PretrainConfig.__dataclass_fields__)
    if unknown:
        raise TypeError(f"unknown pretrain settings {sorted(unknown)}; see PretrainConfig for the fields")
    config = PretrainConfig(seconds=seconds, seed=seed, **overrides)
    if not 0.0 <= config.unfinished_rate <= 1.0:
        raise ValueError(f"unfinished_rate must be between 0 and 1, got {config.unfinished_rate}")
    if config.init is not None:
        fixed = [k for k in _BUILD_FIELDS if getattr(config, k) != getattr(PretrainConfig, k)]
        if fixed:
            raise ValueError(f"{', '.join(fixed)} cannot be set with init: the model and tokenizer come from {config.init}")
    threads = torch.get_num_threads()
    if config.threads is not None:
        torch.set_num_threads(config.threads)
    try:
        return _pretrain(Path(out_dir), config, progress_bar)
    finally:
        torch.set_num_threads(threads)


def _pretrain(out: Path, config: PretrainConfig, progress_bar: bool) -> dict:
    torch.manual_seed(config.seed)
    t0 = time.perf_counter()
    if config.init is not None:  # before anything is written: a bad --init leaves no empty folder
        model, tokenizer = load_base(config.init)
    out.mkdir(parents=True, exist_ok=True)
    if config.init is None:
        tokenizer = build_tokenizer(tokenizer_corpus(config.tokenizer_problems, config.seed), config.vocab_size)
        model = build_model(tokenizer, hidden_size=config.hidden_size, num_layers=config.num_layers,
                            num_heads=config.num_heads, intermediate_size=config.intermediate_size,
                            max_position_embeddings=config.max_position_embeddings, seed=config.seed)
    setup_seconds = time.perf_counter() - t0
    stats = train(model, tokenizer, config, progress_bar=progress_bar)

    summary: dict = {
        "settings": {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in asdict(config).items()
                     if config.init is None or k not in _BUILD_FIELDS},
        "model": {"architecture": type(model).__name__, "parameters": count_parameters(model),
                  "vocab_size": len(tokenizer), "hidden_size": model.config.hidden_size,
                  "num_layers": model.config.num_hidden_layers, "num_heads": model.config.num_attention_heads,
                  "intermediate_size": model.config.intermediate_size,
                  "tied_embeddings": bool(model.config.tie_word_embeddings), "dtype": str(model.dtype).split(".")[-1]},
        "setup_seconds": round(setup_seconds, 2),
        "training": stats,
        "torch_threads": torch.get_num_threads(),
    }
    source = None if config.init is None else Path(embedded_model_path() if config.init == EMBEDDED else config.init)
    if source is not None and (source.expanduser() / "pretrain.json").is_file():
        # the checkpoint this run continued from, as it was made (its own history included)
        summary["init_pretrain"] = json.loads((source.expanduser() / "pretrain.json").read_text())
    if config.eval_n > 0:
        t1 = time.perf_counter()
        summary["eval_greedy_chain"] = evaluate_chain(model, tokenizer, n=config.eval_n, seed=0)
        summary["eval_greedy_solo"] = evaluate_solo(model, tokenizer, n=config.eval_n, seed=0)
        if config.eval_samples > 0:
            summary["eval_sampled_chain"] = evaluate_chain(model, tokenizer, n=config.eval_n, seed=0,
                                                           temperature=1.0, samples=config.eval_samples)
        summary["eval_seconds"] = round(time.perf_counter() - t1, 1)
        summary["eval_split"] = "synthetic test split, SyntheticMath(split='test').heldout(n, seed=0)"

    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    (out / "pretrain.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def _level_weights(text: str) -> dict[int, float]:
    """``"1,1,2,2"`` -> ``{1: 1.0, 2: 1.0, 3: 2.0, 4: 2.0}`` (weights of levels 1-4)."""
    parts = [float(x) for x in text.split(",")]
    if len(parts) != len(LEVELS):
        raise argparse.ArgumentTypeError(f"give {len(LEVELS)} comma-separated weights, one per level {LEVELS}")
    return dict(zip(LEVELS, parts))


def _role_weights(text: str) -> dict[str, float]:
    """``"1,1,0.5"`` -> weights of reasoner, actor, solver."""
    parts = [float(x) for x in text.split(",")]
    if len(parts) != len(ROLES):
        raise argparse.ArgumentTypeError(f"give {len(ROLES)} comma-separated weights, for {', '.join(ROLES)}")
    return dict(zip(ROLES, parts))


def build_parser() -> argparse.ArgumentParser:
    """The options of ``marft pretrain`` (also ``python -m marft_agents.models.pretrain``)."""
    p = argparse.ArgumentParser(prog="marft pretrain", description=__doc__.split("\n")[0])
    d = PretrainConfig()
    p.add_argument("--out", required=True, help="directory to write the checkpoint and pretrain.json to")
    p.add_argument("--init", default=None,
                   help="continue from this checkpoint (embedded, a folder or a Hub id) instead of building a new model")
    p.add_argument("--max-steps", type=int, default=d.max_steps,
                   help="optimizer steps (default %(default)s; 0: train for --seconds only)")
    p.add_argument("--seconds", type=float, default=d.seconds,
                   help="wall-clock cap of the training loop (default %(default)s)")
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--lr", type=float, default=d.lr, help="peak learning rate (default %(default)s)")
    p.add_argument("--batch-size", type=int, default=d.batch_size)
    p.add_argument("--warmup-steps", type=int, default=d.warmup_steps)
    p.add_argument("--level-weights", type=_level_weights, default=None, help="weights of levels 1-4, e.g. 1,1,1,1")
    p.add_argument("--role-weights", type=_role_weights, default=None,
                   help="weights of the reasoner, actor and solver examples, e.g. 1,1,1")
    p.add_argument("--unfinished-rate", type=float, default=d.unfinished_rate,
                   help="fraction of the reasoner's multi-step solutions cut short (default %(default)s)")
    p.add_argument("--hidden-size", type=int, default=d.hidden_size)
    p.add_argument("--num-layers", type=int, default=d.num_layers)
    p.add_argument("--num-heads", type=int, default=d.num_heads)
    p.add_argument("--intermediate-size", type=int, default=d.intermediate_size)
    p.add_argument("--vocab-size", type=int, default=d.vocab_size)
    p.add_argument("--eval-n", type=int, default=d.eval_n, help="held-out problems to evaluate on (0: skip)")
    p.add_argument("--eval-every", type=float, default=0.0,
                   help="evaluate the greedy chain every this many training seconds (default: only at the end)")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=True,
                   help="show a progress bar (default: yes)")
    return p


def main(argv: Sequence[str] | None = None) -> dict:
    """Pre-train with command-line options and print the key figures of the summary."""
    args = build_parser().parse_args(argv)
    overrides = {k: getattr(args, k) for k in (
        "init", "max_steps", "lr", "batch_size", "warmup_steps", "unfinished_rate", "hidden_size", "num_layers", "num_heads",
        "intermediate_size", "vocab_size", "eval_n", "eval_every", "threads")}
    if args.level_weights is not None:
        overrides["level_weights"] = args.level_weights
    if args.role_weights is not None:
        overrides["role_weights"] = args.role_weights
    overrides["max_steps"] = overrides["max_steps"] or None
    summary = pretrain(args.out, seconds=args.seconds, seed=args.seed, progress_bar=args.progress, **overrides)
    keys = ("model", "training", "eval_greedy_chain", "eval_greedy_solo", "eval_sampled_chain")
    report = {k: {f: v for f, v in summary[k].items() if f not in ("examples", "loss_history")}
              for k in keys if k in summary}
    print(json.dumps(report, indent=2))
    return summary


if __name__ == "__main__":
    main()

"""The SFT loop of ``marft pretrain``: answer-only cross-entropy, AdamW, warm-up then cosine.

The loss covers the response tokens only (the prompt is context, not a target). The run has two
budgets, optimizer steps (``max_steps``) and wall-clock time (``seconds``), and ends at whichever
runs out first; the learning rate warms up, then follows a cosine curve over the budget that binds.
"""

from __future__ import annotations

import math
import time

import torch
from tqdm.auto import tqdm

from marft_agents.models import lm
from marft_agents.pretraining.pretrain_config import PretrainConfig
from marft_agents.pretraining.sft_data import Batch, SFTData
from marft_agents.pretraining.sft_eval import evaluate_chain


def sft_loss(model, batch: Batch) -> torch.Tensor:
    """Mean cross-entropy on the response tokens.

    The shared prefix (the role prompt) runs once and its keys/values are broadcast over the batch,
    and the output layer runs only where a response token is predicted: the same loss and gradients
    as the plain causal-LM loss on full sequences, for less compute.
    """
    out = lm.forward_after_prefix(model.model, batch.prefix, batch.input_ids, batch.attention_mask)
    hidden = out.last_hidden_state  # (B, S, d)
    targets = batch.labels[:, 1:]  # (B, S-1): position t predicts token t+1
    where = targets != -100
    logits = model.lm_head(hidden[:, :-1][where])  # (n_response_tokens, V)
    return torch.nn.functional.cross_entropy(logits.float(), targets[where])


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
    opt = _optimizer(model, config)
    data = SFTData(tokenizer, config, seed=config.seed + 1)
    bar = _progress_bar(progress_bar)
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
            evals.append(_periodic_eval(model, tokenizer, config.eval_every_n, step, elapsed, bar))
            start += time.perf_counter() - t
            next_eval += config.eval_every
            elapsed = time.perf_counter() - start
        progress = _progress(config, step, elapsed)
        if progress >= 1.0:
            break
        lr = _lr_at(config, step, progress)
        value = _sft_step(model, opt, batch, lr, config.grad_clip)
        step += 1
        tokens += int(batch.attention_mask.sum()) + len(batch.prefix) * len(batch.input_ids)
        response_tokens += int((batch.labels != -100).sum())
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
    return {
        "steps": step,
        "train_seconds": round(seconds, 1),
        "examples": step * config.batch_size,
        "tokens": tokens,
        "response_tokens": response_tokens,
        "tokens_per_second": round(tokens / max(seconds, 1e-9)),
        "final_loss_ema": round(ema or float("nan"), 4),
        "loss_history": history,
        "periodic_evals": evals,
    }


def _optimizer(model, config: PretrainConfig) -> torch.optim.AdamW:
    """AdamW with weight decay on the matrices only (not on norms and biases)."""
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=config.lr,
        betas=(0.9, 0.95),
        eps=1e-8,
    )


def _progress_bar(shown: bool) -> tqdm:
    """A bar of the budget used, in percent (steps or seconds, whichever runs out first)."""
    return tqdm(
        total=100,
        unit="%",
        disable=not shown,
        desc="pretrain",
        dynamic_ncols=True,
        bar_format="{l_bar}{bar}| {n:.0f}% [{elapsed}<{remaining}{postfix}]",
    )


def _sft_step(model, opt: torch.optim.Optimizer, batch: Batch, lr: float, grad_clip: float) -> float:
    """One optimizer step at learning rate ``lr``, gradients clipped to norm ``grad_clip``; returns the loss."""
    for group in opt.param_groups:
        group["lr"] = lr
    loss = sft_loss(model, batch)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    opt.step()
    return loss.item()


def _periodic_eval(model, tokenizer, n: int, step: int, elapsed: float, bar: tqdm) -> dict:
    """The greedy chain on ``n`` held-out problems, written above the bar; its record in ``periodic_evals``."""
    result = evaluate_chain(model, tokenizer, n=n, seed=1)
    bar.write(
        f"step {step} ({elapsed:.0f}s): accuracy {result['accuracy']:.3f}, "
        f"reasoner finished {result['reasoner_finished']:.3f}, by level {result['accuracy_by_level']}"
    )
    return {
        "step": step,
        "seconds": round(elapsed, 1),
        **{k: result[k] for k in ("accuracy", "accuracy_by_level", "reasoner_finished", "roles")},
    }

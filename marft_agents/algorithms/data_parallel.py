"""Data-parallel updates: N processes (ranks) learn from their shares of one batch exactly as one process would.

``torchrun`` starts the ranks (``marft_agents/training/launch.py`` opens the process group); each
rank collects whole groups of the update's episodes, so group baselines and chain GAE stay local.
What spans the batch is made global here, so that one update equals one process's update on the
whole batch:

- the minibatch schedule: every rank holds the same generator and permutes the same *global* row
  numbers (:class:`Layout`: rank ``r`` holds rows ``offsets[r]:offsets[r+1]`` of the batch one
  process would have, in the same order), then scores only its own rows of each global minibatch;
- the loss: each term is this rank's mean times its share of the minibatch's rows or tokens
  (:class:`Share`), so that the terms summed over ranks are the global means;
- the gradients: :meth:`Ranks.reduce_gradients` sums the gradients of the parameters that learned,
  then every rank clips and steps the same numbers. No ``DistributedDataParallel`` wrapper: wrapped
  around a multi-adapter peft model it fails on the adapters that get no gradient in a step;
- advantage normalisation and the equal-returns check use the whole batch (:func:`normalize_per_agent`,
  :func:`returns_differ`).

A rank that holds none of a global minibatch's rows scores one of its own steps with share 0: it
joins every collective in the same order as the others and adds exactly zero. With one rank
(:data:`SINGLE`) every function here is the single-process code path, untouched.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from marft_agents.algorithms import advantages as adv


class RankLost(ConnectionError):
    """A collective that could not finish: another rank died (``kill -9``, a lost node) or stayed away longer than
    the process group's timeout. An OSError, so that ``marft train`` says it in one line (exit status 1)."""


def _collective(ranks: Ranks, call, *args, **kwargs):
    """``call(*args, **kwargs)``, a torch.distributed collective; the backend's failure as one :class:`RankLost`."""
    try:
        return call(*args, **kwargs)
    except RuntimeError as err:  # gloo's "Connection closed by peer", nccl's and gloo's timeouts (DistError or not)
        first = next((line.strip() for line in str(err).splitlines() if line.strip()), type(err).__name__)
        raise RankLost(
            f"rank {ranks.rank} of {ranks.world}: another rank stopped or stayed away during a collective "
            f"({first[:200]}); the run stopped there: continue from its last checkpoint with --resume"
        ) from None


@dataclass(frozen=True)
class Ranks:
    """This process's place among the ranks that learn together (``world == 1``: alone, no collective runs)."""

    rank: int = 0
    """This process's rank (torchrun's ``RANK``); rank 0 alone writes the run's files."""
    world: int = 1
    """How many ranks learn together (torchrun's ``WORLD_SIZE``)."""
    device: str = "cpu"
    """Where the tensors of a collective live: the model's device (nccl reduces CUDA tensors, gloo CPU ones)."""

    @property
    def parallel(self) -> bool:
        """Whether other ranks take part (every collective is a no-op otherwise)."""
        return self.world > 1

    @property
    def lead(self) -> bool:
        """Whether this is rank 0: the one that writes the run folder, logs, checkpoints and evaluates."""
        return self.rank == 0

    def sum(self, values: torch.Tensor) -> torch.Tensor:
        """The element-wise sum of ``values`` over the ranks, in float64 on ``values``' device (``values`` itself when
        alone)."""
        if not self.parallel:
            return values
        out = values.detach().to(self.device, torch.float64).clone()  # nccl reduces tensors on the rank's GPU
        _collective(self, dist.all_reduce, out)
        return out.to(values.device)

    def gather(self, obj: Any) -> list[Any]:
        """Every rank's ``obj`` (picklable), in rank order."""
        if not self.parallel:
            return [obj]
        out: list[Any] = [None] * self.world
        _collective(self, dist.all_gather_object, out, obj)
        return out

    def broadcast(self, obj: Any) -> Any:
        """Rank 0's ``obj`` on every rank."""
        if not self.parallel:
            return obj
        box = [obj if self.lead else None]
        _collective(self, dist.broadcast_object_list, box, src=0)
        return box[0]

    def same_weights(self, params: list[torch.nn.Parameter]) -> None:
        """Overwrite ``params`` with rank 0's values, in place (every rank starts from the same weights)."""
        if not self.parallel:
            return
        for p in params:
            _collective(self, dist.broadcast, p.data, src=0)

    def reduce_gradients(self, params: list[torch.nn.Parameter], loss: torch.Tensor) -> torch.Tensor:
        """Sum ``params``' gradients over the ranks in place; returns the summed ``loss``.

        A gradient missing on one rank counts as zeros there; a gradient missing on *every* rank stays missing
        (``None``), as in one process: an all-reduced zero would make Adam take a momentum step that one
        process never takes. One flat all-reduce: the gradients, a presence flag per parameter and the loss
        travel together, so every rank learns the global loss (to refuse a non-finite one on every rank at
        once) without a second collective.
        """
        if not self.parallel:
            return loss.detach()
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        present = torch.tensor([float(p.grad is not None) for p in params], device=loss.device)  # (P,)
        flat = torch.cat([g.detach().reshape(-1).float() for g in grads] + [present, loss.detach().reshape(1).float()])
        _collective(self, dist.all_reduce, flat)
        start, flags = 0, flat[-1 - len(params) : -1]
        for p, g, anywhere in zip(params, grads, flags.tolist()):
            n = g.numel()
            p.grad = flat[start : start + n].view_as(g).to(g.dtype) if anywhere > 0 else None
            start += n
        return flat[-1]

    def mean_metrics(self, metrics: dict[str, float]) -> dict[str, float]:
        """Every key's mean over the ranks that report it (the update's metrics, logged by rank 0)."""
        if not self.parallel:
            return metrics
        values: dict[str, list[float]] = {}
        for part in self.gather(metrics):
            for k, v in part.items():
                values.setdefault(k, []).append(v)
        return {k: float(np.max(v) if k.endswith("_max") else np.mean(v)) for k, v in values.items()}

    def share_error(self, err: BaseException | None) -> BaseException | None:
        """The first error any rank met (in rank order), the same on every rank; None when none did."""
        if not self.parallel:
            return err
        try:
            mine = pickle.dumps(err)
        except Exception:  # an error that does not pickle travels as its type's name and its message
            mine = pickle.dumps(RuntimeError(f"{type(err).__name__}: {err}"))
        for rank, blob in enumerate(self.gather(mine)):
            found = pickle.loads(blob)
            if found is not None:
                return err if rank == self.rank else found  # its own keeps its traceback
        return None


SINGLE = Ranks()
"""One process: every function of this module is the single-process path."""


@dataclass(frozen=True)
class Share:
    """A part of one optimizer step's minibatch (this rank's of the global one, or one minibatch of an accumulation
    group): the fractions of its rows and of its response tokens, and where it stands among the step's parts."""

    rows: float = 1.0
    """Local rows over the step's rows: scales a mean over rows (an action-level loss, a value loss)."""
    tokens: float = 1.0
    """Local tokens over the step's tokens: scales a mean over tokens (entropy, a per-token KL)."""
    first: bool = True
    """Whether it opens its step (``grad_accumulation``: the first minibatch of its group; the gradients start at 0)."""
    last: bool = True
    """Whether it closes its step (the optimizer steps after it, on every part's gradients)."""
    within: tuple[float, float] | None = None
    """Local rows and tokens over the global minibatch's, where those differ from ``rows`` and ``tokens`` (this rank's
    part of one minibatch of an accumulation group); None: the same."""

    @property
    def weights(self) -> tuple[float, float]:
        """``(rows, tokens)``: what this rank's statistics of its minibatch weigh in their means over the ranks."""
        return self.within if self.within is not None else (self.rows, self.tokens)


WHOLE = Share()
"""The whole of a minibatch: what one process holds."""


@dataclass(frozen=True)
class Layout:
    """Where the rows of the update's batch live: rank ``r`` holds global rows ``offsets[r]:offsets[r + 1]``."""

    offsets: tuple[int, ...]
    """``(world + 1,)`` first global row of every rank, then the batch's size."""
    sizes: np.ndarray
    """Every global row's size in tokens (its response length; 1 where rows are not token sequences)."""
    rank: int

    @classmethod
    def gathered(cls, ranks: Ranks, sizes: list[int]) -> Layout:
        """The layout of the batch whose local rows have ``sizes`` (one gather)."""
        parts = ranks.gather(list(sizes))
        offsets = tuple(int(x) for x in np.cumsum([0] + [len(p) for p in parts]))
        return cls(offsets=offsets, sizes=np.asarray([n for p in parts for n in p], dtype=np.int64), rank=ranks.rank)

    def to_global(self, ranks: Ranks, idx: list[int] | np.ndarray) -> np.ndarray:
        """Every rank's local row numbers ``idx`` as global ones, in rank order (one gather)."""
        parts = ranks.gather([int(i) for i in idx])
        return np.asarray([self.offsets[r] + i for r, p in enumerate(parts) for i in p], dtype=np.int64)

    def local(self, rows: np.ndarray) -> np.ndarray:
        """This rank's rows among the global ``rows``, as local row numbers, in the order given."""
        lo, hi = self.offsets[self.rank], self.offsets[self.rank + 1]
        mine = rows[(rows >= lo) & (rows < hi)]
        return mine - lo

    def share(self, rows: np.ndarray, mine: np.ndarray, group: np.ndarray | None = None, **place: bool) -> Share:
        """This rank's share of the global minibatch ``rows`` that it holds as local ``mine``; of its accumulation
        ``group`` (global rows) when one is given (``place``: its ``first`` and ``last``)."""
        within = self.fractions(rows, mine)
        if group is None or len(group) == len(rows):
            return Share(*within, **place)
        return Share(*self.fractions(group, mine), **place, within=within)

    def fractions(self, rows: np.ndarray, mine: np.ndarray) -> tuple[float, float]:
        """The fractions of the global ``rows``' rows and tokens that local ``mine`` holds."""
        tokens = int(self.sizes[rows].sum())
        return len(mine) / len(rows), int(self.sizes[mine + self.offsets[self.rank]].sum()) / max(tokens, 1)


def pieces(rows: np.ndarray, lengths: np.ndarray | None, max_tokens: int) -> list[np.ndarray]:
    """``rows`` in consecutive micro-batches of at most ``max_tokens`` padded tokens each (its rows times its longest
    row's ``lengths``; a row longer than that alone), in order. ``max_tokens`` 0 (or no ``lengths``): ``[rows]``."""
    if not max_tokens or lengths is None:
        return [rows]
    out, start, longest = [], 0, 0
    for k, row in enumerate(rows):
        wider = max(longest, int(lengths[row]))
        if k > start and (k - start + 1) * wider > max_tokens:  # this row would overflow the micro-batch: a new one
            out.append(rows[start:k])
            start, wider = k, int(lengths[row])
        longest = wider
    out.append(rows[start:])
    return out


def cut(
    order: np.ndarray,
    minibatch_size: int,
    accumulation: int = 1,
    lengths: np.ndarray | None = None,
    max_tokens: int = 0,
) -> Iterator[tuple[np.ndarray, np.ndarray, bool, bool]]:
    """``order`` in minibatches, ``accumulation`` of them to an optimizer step, each minibatch in micro-batches of at
    most ``max_tokens`` padded tokens (:func:`pieces`; 0: whole): ``(group, rows, first, last)`` for each part, its
    step's rows, its own, and whether it opens or closes its step (a pass's last group may hold fewer)."""
    span = minibatch_size * accumulation
    for start in range(0, len(order), span):
        group = order[start : start + span]
        parts = [
            part
            for k in range(0, len(group), minibatch_size)
            for part in pieces(group[k : k + minibatch_size], lengths, max_tokens)
        ]
        for k, rows in enumerate(parts):
            yield group, rows, k == 0, k == len(parts) - 1


def passes(
    steps: list,
    idx: list[int],
    rng: np.random.Generator | None,
    *,
    minibatch_size: int,
    epochs: int,
    accumulation: int = 1,
    max_tokens: int = 0,
) -> Iterator[tuple[np.ndarray, Share]]:
    """One process's minibatches of the agent-steps ``idx``: ``epochs`` passes, each in a fresh ``rng`` permutation
    (None: in ``idx`` order), each part (a minibatch, or a micro-batch of at most ``max_tokens`` padded tokens) with its
    :class:`Share` of its optimizer step (alone: all of it)."""
    lengths = padded_lengths(steps) if max_tokens else None
    for _ in range(epochs):
        order = np.asarray(idx) if rng is None else rng.permutation(idx)
        for group, rows, first, last in cut(order, minibatch_size, accumulation, lengths, max_tokens):
            if first and last:
                yield rows, WHOLE
                continue
            tokens = sum(len(steps[i].response) for i in group)  # a mean over tokens is over the group's
            part = sum(len(steps[i].response) for i in rows) / max(tokens, 1)
            yield rows, Share(rows=len(rows) / len(group), tokens=part, first=first, last=last)


def schedule(
    ranks: Ranks,
    sizes: list[int],
    idx: list[int],
    rng: np.random.Generator,
    *,
    minibatch_size: int,
    epochs: int,
    fallback: int | None,
    accumulation: int = 1,
    lengths: list[int] | None = None,
    max_tokens: int = 0,
) -> Iterator[tuple[np.ndarray, Share]]:
    """``epochs`` passes of global minibatches over every rank's rows ``idx``, as this rank takes part in them.

    Yields this rank's local rows of each global minibatch and its :class:`Share`; where it holds none,
    the local row ``fallback`` with share 0 (it still joins the gradient sum). ``sizes``: the size in
    tokens of each local row of the batch. Every rank draws the same permutations from ``rng``.
    ``accumulation``: each group of that many global minibatches is one optimizer step; a share is of its group.
    ``max_tokens`` (with each local row's padded ``lengths``): every global minibatch in the micro-batches a single
    process would cut (:func:`pieces`), each a part of its step as an accumulated minibatch is.
    """
    layout = Layout.gathered(ranks, sizes)
    everyone = layout.to_global(ranks, idx)  # the single process's idx
    widths = None  # every global row's padded length, for the micro-batches (one gather)
    if max_tokens and lengths is not None:
        widths = np.asarray([n for part in ranks.gather(list(lengths)) for n in part], dtype=np.int64)
    for _ in range(epochs):
        order = rng.permutation(everyone)
        for group, rows, first, last in cut(order, minibatch_size, accumulation, widths, max_tokens):
            mine = layout.local(rows)
            if len(mine):
                yield mine, layout.share(rows, mine, group, first=first, last=last)
            elif fallback is None:
                raise RuntimeError(f"rank {ranks.rank} holds no step to join the update's gradient sum with")
            else:
                yield np.asarray([fallback]), Share(rows=0.0, tokens=0.0, first=first, last=last)


def step_schedule(
    ranks: Ranks,
    steps: list,
    idx: list[int],
    rng: np.random.Generator | None,
    *,
    minibatch_size: int,
    epochs: int,
    accumulation: int = 1,
    max_tokens: int = 0,
) -> Iterator[tuple[np.ndarray, Share]]:
    """The minibatches of the agent-steps ``idx``: one process's :func:`passes` (or, without an ``rng``, a rank's own
    steps in order), else :func:`schedule` over agent-steps (a row's size: its response's length); a rank that holds
    none of a global minibatch's rows scores its first step of ``idx`` (or its first generated step) with share 0.
    ``max_tokens``: micro-batches of at most that many padded tokens (:func:`pieces`; 0: whole minibatches)."""
    sizes = dict(minibatch_size=minibatch_size, epochs=epochs, accumulation=accumulation, max_tokens=max_tokens)
    if not ranks.parallel or rng is None:
        return passes(steps, idx, rng, **sizes)
    generating = next((i for i, s in enumerate(steps) if s.response and not s.skipped), None)
    fallback = idx[0] if len(idx) else generating
    lengths = list(padded_lengths(steps))
    return schedule(ranks, [len(s.response) for s in steps], idx, rng, **sizes, fallback=fallback, lengths=lengths)


def padded_lengths(steps: list) -> np.ndarray:
    """Each agent-step's prompt and response length, ``(N,)``: what its row of a scoring pass is padded to, at most."""
    return np.asarray([len(s.prompt) + len(s.response) for s in steps], dtype=np.int64)


def shared_means(ranks: Ranks, values: dict[str, float], shares: dict[str, float]) -> dict[str, float]:
    """The global means of per-rank means ``values``, each weighted by its key's share (one all-reduce).

    A key whose share is missing is left as this rank's value.
    """
    if not ranks.parallel:
        return values
    keys = [k for k in values if k in shares]
    total = ranks.sum(torch.tensor([values[k] * shares[k] for k in keys], dtype=torch.float64, device=ranks.device))
    return {**values, **{k: float(total[i]) for i, k in enumerate(keys)}}


def held(ranks: Ranks, idx_of: dict[str, list[int]]) -> dict[str, bool]:
    """Whether any rank holds steps of each adapter: every rank then steps the same adapters."""
    if not ranks.parallel:
        return {a: bool(idx) for a, idx in idx_of.items()}
    counts = ranks.sum(torch.tensor([float(len(idx)) for idx in idx_of.values()], device=ranks.device))
    return {a: bool(counts[k] > 0) for k, a in enumerate(idx_of)}


def returns_differ(ranks: Ranks, returns: torch.Tensor) -> bool:
    """:func:`~marft_agents.algorithms.advantages.returns_differ` over every rank's episode returns ``(E,)``."""
    if not ranks.parallel:
        return adv.returns_differ(returns)
    return adv.returns_differ(
        torch.cat([torch.as_tensor(r, device=returns.device) for r in ranks.gather(returns.tolist())])
    )


def everyone(ranks: Ranks, rows: torch.Tensor) -> torch.Tensor:
    """Every rank's ``rows`` ``(n_r, ...)`` laid end to end in rank order (the batch one process holds), on ``rows``'
    device."""
    if not ranks.parallel:
        return rows
    return torch.cat([part.to(rows.device) for part in ranks.gather(rows.detach().cpu())])


def normalize_per_agent(
    ranks: Ranks,
    advantages: torch.Tensor,
    agents: torch.Tensor,
    n_agents: int,
    mask: torch.Tensor | None = None,
    eps: float = 1e-8,
) -> torch.Tensor:
    """:func:`~marft_agents.algorithms.advantages.normalize_per_agent` with every agent's mean and std over the whole
    batch.

    ``agents`` ``(N,)`` numbers each row's agent in ``range(n_agents)`` (the same numbering on every
    rank). Two all-reduces: the counts and sums, then the squared deviations from the global means.
    """
    if not ranks.parallel:
        return adv.normalize_per_agent(advantages, agents, mask, eps)
    valid = torch.ones_like(advantages, dtype=torch.bool) if mask is None else mask
    rows = advantages.double()
    one_hot = torch.nn.functional.one_hot(agents, n_agents).double()  # (N, n_agents)
    if rows.dim() == 2:  # (N, R): each row's real entries
        count = one_hot.T @ valid.double().sum(1)
        total = one_hot.T @ (rows * valid).sum(1)
    else:
        count, total = one_hot.T @ valid.double(), one_hot.T @ (rows * valid)
    both = ranks.sum(torch.cat([count, total]))
    count, total = both[:n_agents], both[n_agents:]
    mean = total / count.clamp(min=1)  # (n_agents,)
    centred = rows - (mean[agents].unsqueeze(1) if rows.dim() == 2 else mean[agents])
    squares = (centred**2 * valid).sum(1) if rows.dim() == 2 else centred**2 * valid
    std = (ranks.sum(one_hot.T @ squares) / count.clamp(min=1)).sqrt()  # population std, as normalize's
    scale = std[agents].unsqueeze(1) if rows.dim() == 2 else std[agents]
    out = (centred / (scale + eps)).float()
    enough = (count >= 2)[agents]  # a single sample has no spread to normalise by
    enough = enough.unsqueeze(1) if rows.dim() == 2 else enough
    return torch.where(valid & enough, out, torch.zeros_like(out))

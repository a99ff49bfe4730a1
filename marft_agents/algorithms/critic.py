"""The shared critic: ``V(o^i)``, a small MLP on frozen base features of an agent's observation.

Because agent ``i``'s observation contains its predecessors' same-round actions, one value function
shared by all agents estimates MARFT's sequential value ``V(o, a^{1:i-1})``. The features are the
base model's final hidden state at the last prompt token with adapters disabled (the original code
used a frozen copy of the base; ours needs no copy). Since the base is frozen the learner computes
the features once per update (:func:`features`, or :func:`token_features` before every response
token) and the critic trains on them alone; :func:`fit_critic` is that training loop, shared by
every learner with a value head, and :class:`Critic` holds a head with its optimizer and fit settings
(what MARFT, PPO and IPPO/MAPPO keep: they call it, they do not inherit it).

Raw hidden states are a poor input for an MLP trained with Adam: each feature's offset and scale are
whatever the base's last layer made them, and Adam's first steps move every weight by about ``lr``
whatever its gradient, so one step moves a unit's pre-activation by about ``lr * sum |x|`` (a sum
over all ``d`` features). The head therefore standardises each feature with running statistics
(:class:`FeatureScaler`) that the learner feeds once per update (:meth:`ValueHead.observe`) before
it reads the old values; they are buffers, so checkpoints carry them and a resumed run scales its
inputs as the uninterrupted one does.
``benchmarks/critic_fit.py`` measures the effect (``docs/algorithms/marft.md``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

from marft_agents.algorithms import data_parallel as dp
from marft_agents.algorithms.data_parallel import SINGLE, WHOLE, Ranks, Share, schedule
from marft_agents.algorithms.losses import clipped_value_loss, ensure_finite, masked_mean

if TYPE_CHECKING:
    from marft_agents.models.policy import LaMASPolicy
    from marft_agents.models.protocol import Policy
    from marft_agents.rollout.episode import AgentStep


STD_FLOOR = 1e-2
"""Smallest standard deviation a feature is divided by: a feature that barely varies is not blown up."""
CLIP = 10.0
"""Standardised features are clipped to ``[-CLIP, CLIP]``: one odd prompt cannot swamp the head."""


def standardise(x: torch.Tensor, mean: torch.Tensor, var: torch.Tensor) -> torch.Tensor:
    """``clip((x - mean) / max(sqrt(var), STD_FLOOR), -CLIP, CLIP)`` per feature (the last dim)."""
    std = var.sqrt().clamp_min(STD_FLOOR)
    return ((x - mean) / std).clamp(-CLIP, CLIP)


class FeatureScaler(nn.Module):
    """Running per-feature mean and variance of every row observed so far; standardises with them.

    The statistics are exact over all observed rows (counts, means and sums of squared deviations
    merged pairwise, in float64), not a moving average: the base is frozen, so the features of a given
    prompt never change and older batches stay as valid as new ones. Before any row is observed it
    passes features through unchanged.
    """

    def __init__(self, in_features: int):
        super().__init__()
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))
        self.register_buffer("mean", torch.zeros(in_features, dtype=torch.float64))
        self.register_buffer("m2", torch.zeros(in_features, dtype=torch.float64))

    @torch.no_grad()
    def observe(self, rows: torch.Tensor) -> None:
        """Add ``rows`` ``(n, d)`` to the statistics."""
        rows = rows.detach().double()
        n = rows.shape[0]
        if n == 0:
            return
        mean = rows.mean(0)  # (d,)
        m2 = ((rows - mean) ** 2).sum(0)  # (d,)
        total = self.count + n
        delta = mean - self.mean
        self.mean += delta * (n / total)
        self.m2 += m2 + delta**2 * (self.count * n / total)
        self.count.fill_(total)

    def variance(self) -> torch.Tensor:
        """The population variance of each feature over the observed rows, ``(d,)``."""
        return self.m2 / self.count.clamp_min(1.0)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        if self.count == 0:
            return features
        return standardise(features, self.mean.to(features.dtype), self.variance().to(features.dtype))  # (..., d)


class ValueHead(nn.Module):
    """An MLP from standardised base features to a scalar value: ``d -> hidden -> hidden -> 1`` with ReLU."""

    def __init__(self, in_features: int, hidden: int = 256):
        super().__init__()
        self.scale = FeatureScaler(in_features)
        self.net = nn.Sequential(
            nn.Linear(in_features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1)
        )

    def observe(self, features: torch.Tensor, mask: torch.Tensor | None = None) -> None:
        """Feed this update's features to the input statistics: ``(N, d)``, or ``(N, R, d)`` with ``mask``
        ``(N, R)``."""
        self.scale.observe(features if mask is None else features[mask])

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.net(self.scale(features)).squeeze(-1)  # (B, d) -> (B,), or (B, R, d) -> (B, R)


class Critic:
    """A value model with its optimizer and fit settings: what an action-level learner values and fits each update."""

    def __init__(
        self,
        head: nn.Module,
        device: torch.device,
        *,
        lr: float,
        epochs: int,
        minibatch_size: int,
        value_clip: float | None,
        max_grad_norm: float,
        params: list[nn.Parameter] | None = None,
    ):
        """``head`` maps features to values (a :class:`ValueHead`, or several); it is made on the CPU and moved to
        ``device``, so every device starts from the same weights. One AdamW at ``lr`` steps ``params`` (default: all
        of the head's; a head with per-agent parts leaves frozen agents' out)."""
        self.head = head.to(device)
        params = list(self.head.parameters()) if params is None else params
        self.optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
        self.fit_settings = dict(
            epochs=epochs, minibatch_size=minibatch_size, value_clip=value_clip, max_grad_norm=max_grad_norm
        )

    def observe(self, *inputs: torch.Tensor, ranks: Ranks = SINGLE) -> None:
        """Feed the head's input statistics this update's rows (data-parallel: every rank's), before any value is
        read."""
        self.head.observe(*(dp.everyone(ranks, x) for x in inputs))

    def observe_and_value(self, *inputs: torch.Tensor, ranks: Ranks = SINGLE) -> torch.Tensor:
        """:meth:`observe` the rows, then their :meth:`values`: the old values of an update read this update's
        statistics."""
        self.observe(*inputs, ranks=ranks)
        return self.values(*inputs)

    @torch.no_grad()
    def values(self, *inputs: torch.Tensor) -> torch.Tensor:
        """The head's values of ``inputs`` (no grad): ``(N,)`` for ``(N, d)`` features."""
        return self.head(*inputs)

    def fit(
        self,
        inputs: tuple[torch.Tensor, ...],
        values_old: torch.Tensor,
        returns: torch.Tensor,
        rng: np.random.Generator,
        *,
        mask: torch.Tensor | None = None,
        ranks: Ranks = SINGLE,
    ) -> dict[str, float]:
        """Fit the head on ``inputs`` to ``returns`` with the clipped value loss (:func:`fit_critic`); its metrics.

        ``values_old``/``returns`` are ``(N,)``, or ``(N, R)`` with ``mask`` (one value per token)."""
        return fit_critic(
            self.head, self.optimizer, inputs, values_old, returns, rng, **self.fit_settings, mask=mask, ranks=ranks
        )

    def parameters(self) -> list[nn.Parameter]:
        """The parameters its optimizer steps."""
        return [p for g in self.optimizer.param_groups for p in g["params"]]

    def state_dict(self) -> dict:
        """The head's weights and input statistics, and its optimizer's state (a checkpoint's ``critic`` entries)."""
        return {"critic": self.head.state_dict(), "critic_optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        """Restore what :meth:`state_dict` returned."""
        self.head.load_state_dict(state["critic"])
        self.optimizer.load_state_dict(state["critic_optimizer"])


class ValueHeads(nn.Module):
    """``n`` independent value heads; row ``b`` of the batch is valued by head ``head[b]``."""

    def __init__(self, in_features: int, n: int, widths: list[int] | None = None):
        super().__init__()
        self.widths = [in_features] * n if widths is None else list(widths)
        """Head ``k`` reads the first ``widths[k]`` feature columns (agents on models of other widths: ``team.py``)."""
        self.heads = nn.ModuleList(ValueHead(w) for w in self.widths)

    def observe(self, features: torch.Tensor, head: torch.Tensor, mask: torch.Tensor | None = None) -> None:
        """Feed each head the rows it values (:meth:`ValueHead.observe`): ``(N, d)``, or ``(N, R, d)`` with ``mask``."""
        for k, net in enumerate(self.heads):
            rows = head == k
            net.observe(features[rows][..., : self.widths[k]], None if mask is None else mask[rows])

    def forward(self, features: torch.Tensor, head: torch.Tensor) -> torch.Tensor:
        out = features.new_zeros(features.shape[:-1])  # (B,) or (B, R)
        for k, net in enumerate(self.heads):
            rows = head == k
            if rows.any():
                out[rows] = net(features[rows][..., : self.widths[k]])  # (b, d_k) or (b, R, d_k)
        return out


def model_heads(policy: Policy) -> tuple[nn.Module, dict[str, int] | None]:
    """The value head of a critic every agent shares (MARFT, MAPPO), and each agent's head index.

    One model: one :class:`ValueHead` at its width, and no index (None). A team of models (``models/team.py``):
    one head per model at that model's width (:class:`ValueHeads`; the agents of one model share theirs), since
    features of bases of different widths are not one space.
    """
    if not policy.is_team:
        return ValueHead(policy.hidden_size), None
    models = list(dict.fromkeys(policy.model_of[a] for a in policy.agents))
    width = {policy.model_of[a]: policy.width_of(a) for a in policy.agents}
    head_of = {a: models.index(policy.model_of[a]) for a in policy.agents}
    return ValueHeads(policy.hidden_size, len(models), [width[m] for m in models]), head_of


def head_rows(head_of: dict[str, int], steps: list[AgentStep], device: torch.device) -> torch.Tensor:
    """Each step's head index, ``(N,)``."""
    return torch.tensor([head_of[s.agent] for s in steps], dtype=torch.long, device=device)


def features(policy: LaMASPolicy, steps: list[AgentStep], minibatch_size: int) -> torch.Tensor:
    """Frozen base features of every step's prompt, ``(N, d)``, computed in minibatches."""
    # Chunks of one agent's steps share its role prompt, which the policy then runs only once.
    order = sorted(range(len(steps)), key=lambda i: steps[i].agent)
    out = torch.empty(len(steps), policy.hidden_size, device=policy.device)
    team = policy.is_team  # a team of models (models/team.py): each agent's features from its own base
    for start in range(0, len(order), minibatch_size):
        chunk = order[start : start + minibatch_size]
        if not team:
            out[chunk] = policy.features([steps[i].prompt for i in chunk])
            continue
        for agent in dict.fromkeys(steps[i].agent for i in chunk):
            rows = [i for i in chunk if steps[i].agent == agent]
            out[rows] = policy.features(
                [steps[i].prompt for i in rows], agent
            )  # (b, D), zero-padded past the agent's width
    return out


def token_features(policy: LaMASPolicy, steps: list[AgentStep], minibatch_size: int) -> torch.Tensor:
    """Frozen base features before every response token, padded to ``(N, R, d)`` (zeros on padding)."""
    width = max((len(s.response) for s in steps), default=0)
    out = torch.zeros(len(steps), width, policy.hidden_size, device=policy.device)
    order = sorted(range(len(steps)), key=lambda i: steps[i].agent)  # chunks share a role prompt
    for start in range(0, len(order), minibatch_size):
        chunk = order[start : start + minibatch_size]
        # a team of models (models/team.py): each agent's features from its own base, zero-padded past its width
        parts = [[i for i in chunk if steps[i].agent == a] for a in dict.fromkeys(steps[i].agent for i in chunk)]
        for rows in parts if policy.is_team else [chunk]:
            agent = steps[rows[0]].agent if policy.is_team else None
            feats = policy.token_features([steps[i].prompt for i in rows], [steps[i].response for i in rows], agent)
            out[rows, : feats.shape[1]] = feats
    return out


def fit_critic(
    critic: nn.Module,
    optimizer: torch.optim.Optimizer,
    inputs: tuple[torch.Tensor, ...],
    values_old: torch.Tensor,
    returns: torch.Tensor,
    rng: np.random.Generator,
    *,
    epochs: int,
    minibatch_size: int,
    value_clip: float | None,
    max_grad_norm: float,
    mask: torch.Tensor | None = None,
    prefix: str = "critic",
    ranks: Ranks = SINGLE,
) -> dict[str, float]:
    """Fit ``critic(*inputs)`` to ``returns`` with the clipped value loss, in shuffled minibatches.

    ``values_old``/``returns`` are ``(N,)`` (one value per step) or ``(N, R)`` with ``mask`` marking
    the real entries (one value per token); every tensor of ``inputs`` has ``N`` rows. ``ranks``: the ``N``
    rows are this rank's, the minibatches the global ones (``data_parallel.schedule``), and the gradients of
    the parameters ``optimizer`` steps (never a frozen agent's head) are summed over the ranks.
    """
    losses = []
    stepped = [p for g in optimizer.param_groups for p in g["params"]]
    for mb, share in _minibatches(ranks, len(values_old), rng, epochs, minibatch_size, mask, values_old.device):
        values = critic(*(x[mb] for x in inputs))
        loss = clipped_value_loss(values, values_old[mb], returns[mb], value_clip, None if mask is None else mask[mb])
        if ranks.parallel:  # this rank's part of the global minibatch's mean
            loss = loss * (share.rows if mask is None else share.tokens)
        else:
            ensure_finite(loss, f"{prefix}/value_loss")
        optimizer.zero_grad(set_to_none=True)
        if share.rows > 0:  # a rank with no row of the minibatch leaves its gradients missing, not zero
            loss.backward()
        total = ranks.reduce_gradients(stepped, loss)  # data-parallel: summed over the ranks
        ensure_finite(total, f"{prefix}/value_loss")
        ensure_finite(torch.nn.utils.clip_grad_norm_(critic.parameters(), max_grad_norm), f"{prefix}/grad_norm")
        optimizer.step()
        losses.append(float(total))
    out = {
        f"{prefix}/value_loss": float(np.mean(losses)) if losses else 0.0,
        f"{prefix}/value_mean": float(masked_mean(values_old, mask)),
    }
    explained = explained_variance(values_old, returns, mask, ranks=ranks)  # of the values before this fit
    if explained is not None:  # returns that do not vary leave nothing to explain: no number rather than a made-up 0
        out[f"{prefix}/explained_variance"] = explained
    return out


FLAT_RETURNS = 1e-12
"""Returns whose variance is at most this share of their mean square do not vary (float64 rounding leaves such a
remainder when every return is the same)."""


def explained_variance(
    values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor | None = None, *, ranks: Ranks = SINGLE
) -> float | None:
    """``1 - Var(returns - values) / Var(returns)`` over the entries ``mask`` marks (every entry without one).

    The share of the returns' variance the values explain: 1 all of it, 0 no better than one constant, below 0
    worse than that. None when the returns do not vary (:data:`FLAT_RETURNS`) or there are fewer than two entries.
    Population variances; ``values``/``returns`` ``(N,)`` or ``(N, R)`` with ``mask``. Data-parallel: over every
    rank's entries (``ranks.sum`` of five float64 sums: one all-reduce, the same number on every rank).
    """
    r = (returns if mask is None else returns[mask]).detach().double()  # (n,)
    e = r - (values if mask is None else values[mask]).detach().double()  # (n,) the part the values miss
    sums = torch.stack([r.new_tensor(float(r.numel())), r.sum(), (r * r).sum(), e.sum(), (e * e).sum()])  # (5,)
    n, r_sum, r_squares, e_sum, e_squares = ranks.sum(sums).tolist()
    if n < 2:
        return None
    r_var = r_squares / n - (r_sum / n) ** 2
    if r_var <= FLAT_RETURNS * r_squares / n:
        return None
    return 1.0 - (e_squares / n - (e_sum / n) ** 2) / r_var


def _minibatches(
    ranks: Ranks,
    n: int,
    rng: np.random.Generator,
    epochs: int,
    minibatch_size: int,
    mask: torch.Tensor | None,
    device: torch.device,
) -> Iterator[tuple[torch.Tensor, Share]]:
    """``epochs`` shuffled passes over ``n`` rows: this rank's rows of each (global) minibatch, on ``device``, and its
    share."""
    if not ranks.parallel:
        for _ in range(epochs):
            order = torch.as_tensor(rng.permutation(n), device=device)
            for start in range(0, n, minibatch_size):
                yield order[start : start + minibatch_size], WHOLE
        return
    sizes = [1] * n if mask is None else [int(k) for k in mask.sum(1)]  # a row's size: 1, or its real entries
    for rows, share in schedule(
        ranks, sizes, list(range(n)), rng, minibatch_size=minibatch_size, epochs=epochs, fallback=0
    ):
        yield torch.as_tensor(rows, device=device), share

"""Advantage estimation: pure functions on tensors, tested against hand-computed numbers.

MARFT's chain GAE treats the agents of a round as consecutive decision steps. Flatten one env's
agent-steps in acting order (round by round, inside a round in the graph's topological order);
then for step ``k`` with value ``V_k`` and successor ``k+1``:

- inside a round:           ``delta_k = r_k + gamma_agent * V_{k+1} - V_k``
- last agent of a round:    ``delta_k = r_k + gamma * (1 - done_k) * V_{k+1} - V_k``

and ``A_k = delta_k + discount_k * lam * (1 - done_k) * A_{k+1}`` with ``discount_k`` the factor used
in ``delta_k``. ``done_k`` is true only on the last agent-step of an episode, so an episode boundary
cuts exactly one link — the reference code also cut the agent-to-agent link of the first round
after a boundary.
"""

from __future__ import annotations

import torch


def chain_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    round_ends: torch.Tensor,
    dones: torch.Tensor,
    *,
    gamma: float,
    gamma_agent: float,
    lam: float,
    last_value: torch.Tensor | float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Chain GAE over flattened agent-steps; returns ``(advantages, returns)``.

    All inputs have shape ``(n_envs, T)`` (or ``(T,)``): per env, its agent-steps in acting order.
    ``round_ends[k]`` marks the last agent of a round, ``dones[k]`` the last agent-step of an episode
    (``dones`` implies ``round_ends``). ``last_value`` bootstraps past the final step when it is not
    done, shape ``(n_envs,)``.
    """
    squeeze = rewards.dim() == 1
    if squeeze:
        rewards, values, round_ends, dones = (x.unsqueeze(0) for x in (rewards, values, round_ends, dones))
    n_envs, T = rewards.shape
    rewards, values = rewards.double(), values.double()
    next_value = (
        torch.as_tensor(last_value, dtype=torch.float64, device=rewards.device).expand(n_envs).clone()
    )  # (n_envs,)
    next_adv = torch.zeros(n_envs, dtype=torch.float64, device=rewards.device)
    advantages = torch.zeros_like(rewards)  # (n_envs, T)
    for k in reversed(range(T)):
        not_done = (~dones[:, k]).double()
        discount = torch.where(
            round_ends[:, k], torch.full_like(next_value, gamma), torch.full_like(next_value, gamma_agent)
        )
        delta = rewards[:, k] + discount * not_done * next_value - values[:, k]
        next_adv = delta + discount * lam * not_done * next_adv
        advantages[:, k] = next_adv
        next_value = values[:, k]
    returns = advantages + values
    if squeeze:
        advantages, returns = advantages[0], returns[0]
    return advantages.float(), returns.float()


def normalize(advantages: torch.Tensor, mask: torch.Tensor | None = None, eps: float = 1e-8) -> torch.Tensor:
    """Zero-mean, unit-std advantages over the entries where ``mask`` is true.

    The mask says what is padding; an advantage that is exactly zero is a real value and is kept
    (the reference code took zeros for padding and turned them into NaN).
    """
    if mask is None:
        mask = torch.ones_like(advantages, dtype=torch.bool)
    valid = advantages[mask]
    if valid.numel() < 2:
        return torch.zeros_like(advantages)  # a single sample has no spread to normalise by
    mean, std = valid.mean(), valid.std(unbiased=False)
    return torch.where(mask, (advantages - mean) / (std + eps), torch.zeros_like(advantages))


def normalize_per_agent(
    advantages: torch.Tensor, agents: torch.Tensor, mask: torch.Tensor | None = None, eps: float = 1e-8
) -> torch.Tensor:
    """:func:`normalize` within each agent's own entries: every agent's advantages get mean 0 and std 1.

    ``agents`` ``(N,)`` holds integer agent ids for the rows of ``advantages`` (``(N,)`` or ``(N, R)``
    with ``mask``). Standardising jointly over several agents would turn the difference between their
    means into a constant push on each agent (the actor's mean advantage was -0.2 to -0.8 per update
    under joint standardisation, not 0), which Adam's sign-like first steps make real.
    """
    out = torch.zeros_like(advantages)
    for a in torch.unique(agents):
        rows = agents == a
        out[rows] = normalize(advantages[rows], None if mask is None else mask[rows], eps)
    return out


def returns_differ(returns: torch.Tensor) -> bool:
    """False when two or more episodes' returns ``(E,)`` are all equal: a policy step would then follow
    nothing but critic noise (every advantage is a value error, and normalising blows it up). A single
    episode has nothing to compare with and counts as differing (its advantage is against the critic)."""
    return returns.numel() < 2 or bool((returns != returns[0]).any())


def group_relative(rewards: torch.Tensor, groups: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """GRPO advantages: each reward minus its group's mean, over the group's std (+ ``eps``).

    ``rewards`` and ``groups`` (integer group ids) have shape ``(B,)``; a group whose rewards are all
    equal gets advantage exactly 0.
    """
    out = torch.zeros_like(rewards, dtype=torch.float32)
    for g in torch.unique(groups):
        members = groups == g
        r = rewards[members].float()
        std = r.std(unbiased=False) if r.numel() > 1 else torch.tensor(0.0, device=r.device)
        out[members] = (r - r.mean()) / (std + eps)
    return out


def agent_scaled(rewards: torch.Tensor, groups: torch.Tensor, agents: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Group-relative advantages on each agent's own scale (Dr.MAS, arXiv 2602.08847): ``(r - mean_g) / (std_a + eps)``.

    The baseline is the reward's group mean (tree siblings: the same context); the scale is the std of
    every reward of the same agent in the batch (``agents``: integer agent ids, ``(B,)``), so an agent
    whose rewards spread little is not scaled up to unit variance group by group, nor pushed around by
    another agent's reward scale. A group whose rewards are all equal gets exactly 0.
    """
    centred = torch.zeros_like(rewards, dtype=torch.float32)
    for g in torch.unique(groups):
        members = groups == g
        centred[members] = rewards[members].float() - rewards[members].float().mean()
    out = torch.zeros_like(centred)
    for a in torch.unique(agents):
        mine = agents == a
        r = rewards[mine].float()
        std = r.std(unbiased=False) if r.numel() > 1 else torch.tensor(0.0, device=r.device)
        out[mine] = centred[mine] / (std + eps)
    return out


def token_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    action_ends: torch.Tensor,
    round_ends: torch.Tensor,
    dones: torch.Tensor,
    mask: torch.Tensor,
    *,
    gamma: float,
    gamma_agent: float,
    gamma_token: float,
    lam: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE over the flattened token sequence of all agents' responses; returns ``(advantages, returns)``.

    Every input is ``(n_envs, T)``: per env, every response token of every agent-step in acting order,
    padded at the end (``mask`` false). ``action_ends`` marks a response's last token, ``round_ends``
    the last token of a round's last agent, ``dones`` the episode's last token. The discount from a
    token to the next one is ``gamma_token`` inside a response, ``gamma_agent`` from one agent's last
    token to the next agent's first, and ``gamma`` (times ``1 - done``) across rounds; then the chain
    GAE recursion of :func:`chain_gae`, one step per token. Rewards sit wherever the caller puts them
    (MARFT: on a response's last token). Padding gets zero advantage and return.
    """
    n_envs, T = rewards.shape
    rewards, values = rewards.double() * mask, values.double() * mask
    discount = torch.where(round_ends, gamma, torch.where(action_ends, gamma_agent, gamma_token)).double()
    # A link into padding (past the final token of an unfinished row) carries nothing.
    keep = (~dones & mask).double() * torch.cat(
        [mask[:, 1:], torch.zeros(n_envs, 1, dtype=torch.bool, device=mask.device)], 1
    ).double()
    next_value = torch.zeros(n_envs, dtype=torch.float64, device=rewards.device)
    next_adv = torch.zeros(n_envs, dtype=torch.float64, device=rewards.device)
    advantages = torch.zeros_like(rewards)  # (n_envs, T)
    for k in reversed(range(T)):  # a scan over token positions, vectorised over envs
        delta = rewards[:, k] + discount[:, k] * keep[:, k] * next_value - values[:, k]
        next_adv = delta + discount[:, k] * lam * keep[:, k] * next_adv
        advantages[:, k] = next_adv
        next_value = values[:, k]
    advantages = advantages * mask
    returns = (advantages + values) * mask
    return advantages.float(), returns.float()


def at_last_token(x: torch.Tensor, lengths: torch.Tensor, width: int) -> torch.Tensor:
    """An ``(N, width)`` tensor holding ``x[i]`` at column ``lengths[i] - 1`` and zero (False) elsewhere."""
    out = torch.zeros(len(x), width, dtype=x.dtype, device=x.device)
    out[torch.arange(len(x), device=x.device), lengths - 1] = x
    return out


def episode_layout(rows: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int, int]:
    """Where each ``(step, token)`` goes when every row's steps are laid end to end.

    ``rows`` ``(N,)`` numbers each step's episode (steps of one episode are consecutive, in acting
    order); ``mask`` ``(N, R)``. Returns ``(row, col)`` of every real token (row-major order of
    ``mask.nonzero()``), the number of rows and the longest row's length.
    """
    lengths = mask.sum(1)  # (N,)
    n_rows = int(rows.max()) + 1 if len(rows) else 0
    per_row = torch.zeros(n_rows, dtype=lengths.dtype, device=lengths.device).index_add_(0, rows, lengths)  # (E,)
    row_start = torch.cumsum(per_row, 0) - per_row  # (E,) global offset of each row's first token
    step_start = torch.cumsum(lengths, 0) - lengths - row_start[rows]  # (N,) offset inside its row
    step, tok = mask.nonzero(as_tuple=True)
    return rows[step], step_start[step] + tok, n_rows, int(per_row.max()) if n_rows else 0


def token_advantages(
    token_rewards: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor,
    rows: torch.Tensor,
    round_ends: torch.Tensor,
    dones: torch.Tensor,
    *,
    gamma: float,
    gamma_agent: float,
    gamma_token: float,
    lam: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Token GAE for agent-steps given as ``(N, R)`` tensors; returns ``(advantages, returns)``, ``(N, R)``.

    ``token_rewards`` and ``values`` are per token; ``rows`` ``(N,)`` says which sequence each step
    belongs to (its episode; or ``arange(N)`` to run each response on its own); ``round_ends`` and
    ``dones`` ``(N,)`` flag steps. Steps are scattered into ``(n_rows, T)``, scanned, gathered back.
    """
    lengths = mask.sum(1)
    R = mask.shape[1]
    r_idx, c_idx, n_rows, T = episode_layout(rows, mask)
    step, tok = mask.nonzero(as_tuple=True)

    def grid(x: torch.Tensor) -> torch.Tensor:  # (N, R) -> (n_rows, T)
        out = torch.zeros(n_rows, T, dtype=x.dtype, device=x.device)
        out[r_idx, c_idx] = x[step, tok]
        return out

    last = at_last_token(torch.ones(len(lengths), dtype=torch.bool, device=lengths.device), lengths, R)  # (N, R)
    adv, ret = token_gae(
        grid(token_rewards.float()),
        grid(values.float()),
        grid(last),
        grid(last & round_ends.unsqueeze(1)),
        grid(last & dones.unsqueeze(1)),
        grid(mask),
        gamma=gamma,
        gamma_agent=gamma_agent,
        gamma_token=gamma_token,
        lam=lam,
    )
    out_adv, out_ret = torch.zeros_like(values, dtype=torch.float32), torch.zeros_like(values, dtype=torch.float32)
    out_adv[step, tok], out_ret[step, tok] = adv[r_idx, c_idx], ret[r_idx, c_idx]
    return out_adv, out_ret


def spread(advantages: torch.Tensor, mask: torch.Tensor | None = None) -> float:
    """The population std of the entries where ``mask`` is true (every entry without one); 0 with fewer than two.

    Logged before normalisation (``signal/advantage_std``): 0 means the update has nothing to learn from.
    """
    valid = advantages[mask] if mask is not None else advantages.reshape(-1)
    return float(valid.double().std(unbiased=False)) if valid.numel() > 1 else 0.0

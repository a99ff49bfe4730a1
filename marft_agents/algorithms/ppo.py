"""Single-agent PPO: the baseline of ``ALGORITHMS.md``, one agent with the same model and budget.

It is action-level MARFT with one agent, and the pieces reduce to textbook PPO:

1. A critic ``V(o)``, a small MLP on frozen base features of the observation (``critic.py``).
2. GAE over the agent's rounds: with one agent every step ends its round, so chain GAE's
   ``delta_t = r_t + gamma (1 - done_t) V(o_{t+1}) - V(o_t)`` is plain GAE (``gamma_agent`` never applies).
3. PPO-clip on whole responses, ``log pi(a|o)`` the sum (or mean) of the response's token log-probs
   under the sampling temperature; entropy bonus; optional KL-to-reference penalty and approx-KL gate.
4. A clipped value loss on the GAE returns.

Select it with ``marft train env=marft/MathSolo-v0 algo=ppo``; keep ``max_new_tokens`` and
``episodes_per_update`` as in the multi-agent run it is compared with (same model, same budget).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from marft_agents.algorithms.marft import MARFT, MARFTConfig, PPOSettings
from marft_agents.policy import LaMASPolicy


@dataclass
class PPOConfig(PPOSettings):
    """Hyper-parameters of single-agent PPO: the shared PPO ones, with MARFT's defaults for a fair comparison."""


class PPO(MARFT):
    """Single-agent PPO: MARFT's update on a one-agent env, where chain GAE is plain GAE."""

    def __init__(self, policy: LaMASPolicy, config: PPOConfig, temperature: float):
        if len(policy.agents) != 1:
            raise ValueError(
                f"single-agent PPO needs a one-agent env such as marft/MathSolo-v0, got agents {policy.agents}; "
                "use algo=marft, ippo or mappo for several agents"
            )
        # gamma_agent never applies with one agent (every step ends its round); both are gamma.
        marft = MARFTConfig(**dataclasses.asdict(config), gamma_agent=config.gamma, agent_iteration_interval=0)
        super().__init__(policy, marft, temperature)

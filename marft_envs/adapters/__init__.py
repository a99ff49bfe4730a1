"""Adapters to and from other projects' APIs, each behind the ``adapters`` extra (docs/adapters.md).

- outward to TRL: :mod:`marft_agents.rollout.trl` (it generates with torch, so it lives in
  ``marft_agents``; this package stays torch-free), a ``rollout_func`` and reward functions that
  let TRL's ``GRPOTrainer`` train on marft envs.
- :mod:`marft_envs.adapters.textarena` (inward): TextArena's multi-player games as FlexEnv ids
  ``marft/TextArena-<Game>-v0``.
- :mod:`marft_envs.adapters.reasoning_gym` (inward): reasoning-gym's tasks as ``marft/ReasoningGym-v0``
  (one agent) and ``marft/ReasoningGym-Chain-v0`` (reasoner -> actor).
- :mod:`marft_envs.adapters.gem` (both ways): any FlexEnv as a GEM ``MultiAgentEnv``
  (``gem_multiagent_env``), and GEM's single-agent envs as ``marft/GEM-v0``.
- :mod:`marft_envs.adapters.openenv` (outward): any FlexEnv behind an OpenEnv server.
- :mod:`marft_envs.adapters.verifiers` (outward): any FlexEnv as a verifiers v1 ``Env`` (``verifiers_env``), one
  ``AgentConfig`` per agent, run through verifiers' own loaders and validation.
- :mod:`marft_envs.adapters.isolated_random`: the private ``random`` state TextArena's and GEM's envs run on.

Nothing here is imported by ``import marft_envs``: each module imports its library when it is used.
"""

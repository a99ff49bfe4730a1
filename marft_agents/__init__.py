"""marft_agents: LLM policies and multi-agent RL trainers for marft_envs."""

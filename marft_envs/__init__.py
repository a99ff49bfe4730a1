"""marft_envs: Flex-POMDP text environments for LLM-based multi-agent systems."""

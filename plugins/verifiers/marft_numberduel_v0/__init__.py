"""The verifiers plugin of marft/NumberDuel-v0, imported by name: ``vf-eval marft_numberduel_v0`` (docs/adapters.md)."""

from marft_envs.adapters.verifiers import define_plugin

__all__ = define_plugin(__name__, "marft/NumberDuel-v0")  # sets this module's Taskset, Env, Harness and their configs

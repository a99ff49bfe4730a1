"""The verifiers plugin of marft/MathDebate-v1, imported by name: ``vf-eval marft_mathdebate_v1`` (docs/adapters.md)."""

from marft_envs.adapters.verifiers import define_plugin

__all__ = define_plugin(__name__, "marft/MathDebate-v1")  # sets this module's Taskset, Env, Harness and their configs

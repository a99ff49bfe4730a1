"""The verifiers plugin of marft/MathDebate-v0, imported by name: ``vf-eval marft_mathdebate_v0`` (docs/adapters.md)."""

from marft_envs.adapters.verifiers import define_plugin

__all__ = define_plugin(__name__, "marft/MathDebate-v0")  # sets this module's Taskset, Env, Harness and their configs

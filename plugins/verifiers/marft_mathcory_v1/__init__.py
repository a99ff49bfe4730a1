"""The verifiers plugin of marft/MathCORY-v1, imported by name: ``vf-eval marft_mathcory_v1`` (docs/adapters.md)."""

from marft_envs.adapters.verifiers import define_plugin

__all__ = define_plugin(__name__, "marft/MathCORY-v1")  # sets this module's Taskset, Env, Harness and their configs

"""The verifiers plugin of marft/MathJigsaw-v2, imported by name: ``vf-eval marft_mathjigsaw_v2`` (docs/adapters.md)."""

from marft_envs.adapters.verifiers import define_plugin

__all__ = define_plugin(__name__, "marft/MathJigsaw-v2")  # sets this module's Taskset, Env, Harness and their configs

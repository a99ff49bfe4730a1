"""The verifiers plugin of marft/MathJigsawSolo-v0, imported by name: ``vf-eval marft_mathjigsawsolo_v0`` (docs/adapters.md)."""

from marft_envs.adapters.verifiers import define_plugin

__all__ = define_plugin(__name__, "marft/MathJigsawSolo-v0")  # sets this module's Taskset, Env, Harness and their configs

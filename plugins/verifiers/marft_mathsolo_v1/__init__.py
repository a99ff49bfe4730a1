"""The verifiers plugin of marft/MathSolo-v1, imported by name: ``vf-eval marft_mathsolo_v1`` (docs/adapters.md)."""

from marft_envs.adapters.verifiers import define_plugin

__all__ = define_plugin(__name__, "marft/MathSolo-v1")  # sets this module's Taskset, Env, Harness and their configs

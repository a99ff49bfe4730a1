"""The verifiers plugin of marft/CodeRepairVote-v0, imported by name: ``vf-eval marft_coderepairvote_v0`` (docs/adapters.md)."""

from marft_envs.adapters.verifiers import define_plugin

__all__ = define_plugin(__name__, "marft/CodeRepairVote-v0")  # sets this module's Taskset, Env, Harness and their configs

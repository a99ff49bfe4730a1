"""The verifiers plugin of marft/BookingFixed-v0, imported by name: ``vf-eval marft_bookingfixed_v0`` (docs/adapters.md)."""

from marft_envs.adapters.verifiers import define_plugin

__all__ = define_plugin(__name__, "marft/BookingFixed-v0")  # sets this module's Taskset, Env, Harness and their configs

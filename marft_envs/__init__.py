"""marft_envs: Flex-POMDP text environments for LLM-based multi-agent systems.

``import marft_envs`` registers every env id in our registry, PettingZoo's (``aec``, and
``parallel`` for Dec-POMDP ones) and Gymnasium's (one-agent ones). Torch-free.
"""

from marft_envs.core import FlexEnv, RoundResult
from marft_envs.errors import EnvUsageError, FlexEnvError, TaskError
from marft_envs.graph import DependencyGraph, GraphError
from marft_envs.registration import RegistrationError, list_envs, make, register, spec
from marft_envs.views import AECView, GymView, ParallelView

__all__ = [
    "AECView",
    "DependencyGraph",
    "EnvUsageError",
    "FlexEnv",
    "FlexEnvError",
    "GraphError",
    "GymView",
    "ParallelView",
    "RegistrationError",
    "RoundResult",
    "TaskError",
    "list_envs",
    "make",
    "register",
    "spec",
]


def _register_builtin() -> None:
    # Imported here, not at the top, so the core stays importable without the task families.
    from marft_envs.tasks.math import MathChain, MathCORY, MathDebate, MathSolo

    # Held-out evaluation: the test split, and "rounds" sets the attempts with feedback. In the
    # debate, "rounds" are debate rounds, not attempts: it has no attempts option.
    heldout = {"eval_kwargs": {"split": "test"}}
    attempts = {**heldout, "attempts_option": "rounds"}
    register("marft/MathChain-v0", MathChain, **attempts)
    register("marft/MathDebate-v0", MathDebate, **heldout)
    register("marft/MathSolo-v0", MathSolo, gym=True, **attempts)
    register("marft/MathCORY-v0", MathCORY, **attempts)

    from marft_envs.tasks.booking import Booking, BookingDecPOMDP, BookingFixed

    # Booking draws a fresh world from each seed: no held-out split, no attempts.
    register("marft/Booking-v0", Booking)
    register("marft/BookingFixed-v0", BookingFixed)
    register("marft/BookingDecPOMDP-v0", BookingDecPOMDP)

    from marft_envs.tasks.code import CodeRepairChain, CodeRepairSolo, CodeRepairVote

    register("marft/CodeRepair-v0", CodeRepairChain, **attempts)
    register("marft/CodeRepairVote-v0", CodeRepairVote, **attempts)
    register("marft/CodeRepairSolo-v0", CodeRepairSolo, gym=True, **attempts)


_register_builtin()

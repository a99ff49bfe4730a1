"""marft_envs: Flex-POMDP text environments for LLM-based multi-agent systems.

``import marft_envs`` registers every env id in our registry, PettingZoo's (``aec``, and
``parallel`` for Dec-POMDP ones) and Gymnasium's (one-agent ones). Torch-free.
"""

from marft_envs.core import FlexEnv, FlexEnvError, RoundResult
from marft_envs.graph import DependencyGraph, GraphError
from marft_envs.registration import list_envs, make, register, spec
from marft_envs.views import AECView, GymView, ParallelView

__all__ = [
    "AECView",
    "DependencyGraph",
    "FlexEnv",
    "FlexEnvError",
    "GraphError",
    "GymView",
    "ParallelView",
    "RoundResult",
    "list_envs",
    "make",
    "register",
    "spec",
]


def _register_builtin() -> None:
    # Imported here, not at the top, so the core stays importable without the task families.
    from marft_envs.tasks.math import MathChain, MathCORY, MathDebate, MathSolo

    register("marft/MathChain-v0", MathChain)
    register("marft/MathDebate-v0", MathDebate)
    register("marft/MathSolo-v0", MathSolo, gym=True)
    register("marft/MathCORY-v0", MathCORY)

    from marft_envs.tasks.booking import Booking, BookingDecPOMDP, BookingFixed

    register("marft/Booking-v0", Booking)
    register("marft/BookingFixed-v0", BookingFixed)
    register("marft/BookingDecPOMDP-v0", BookingDecPOMDP)

    from marft_envs.tasks.code import CodeRepairChain, CodeRepairSolo, CodeRepairVote

    register("marft/CodeRepair-v0", CodeRepairChain)
    register("marft/CodeRepairVote-v0", CodeRepairVote)
    register("marft/CodeRepairSolo-v0", CodeRepairSolo, gym=True)


_register_builtin()

"""marft_envs: Flex-POMDP text environments for LLM-based multi-agent systems.

``import marft_envs`` registers every env id in our registry, PettingZoo's (``aec``, and
``parallel`` for Dec-POMDP ones) and Gymnasium's (one-agent ones), lazily: a task family is
imported when one of its envs is first made. Torch-free.
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
    # "module:Class" targets: a family is imported when one of its envs is first made, not here, so
    # ``import marft_envs`` costs what the caller uses (tests/envs/test_registry.py checks both).
    # Held-out evaluation: the test split, and "rounds" sets the attempts with feedback. In the
    # debate, "rounds" are debate rounds, not attempts: it has no attempts option.
    heldout = {"eval_kwargs": {"split": "test"}}
    attempts = {**heldout, "attempts_option": "rounds"}
    math, booking, code = "marft_envs.tasks.math", "marft_envs.tasks.booking", "marft_envs.tasks.code"
    # -v0 (MathJigsaw -v0, -v1): the synthetic split by uid, as released; the newest ids split by arithmetic.
    register("marft/MathChain-v0", f"{math}.chain_v0:MathChainV0", parallel=False, **attempts)
    register("marft/MathChain-v1", f"{math}.chain:MathChain", parallel=False, **attempts)
    register("marft/MathDebate-v0", f"{math}.debate_v0:MathDebateV0", parallel=True, **heldout)
    register("marft/MathDebate-v1", f"{math}.debate:MathDebate", parallel=True, **heldout)
    register("marft/MathSolo-v0", f"{math}.solo_v0:MathSoloV0", parallel=True, gym=True, **attempts)
    register("marft/MathSolo-v1", f"{math}.solo:MathSolo", parallel=True, gym=True, **attempts)
    register("marft/MathCORY-v0", f"{math}.cory_v0:MathCORYV0", parallel=False, **attempts)
    register("marft/MathCORY-v1", f"{math}.cory:MathCORY", parallel=False, **attempts)
    register("marft/MathJigsaw-v0", f"{math}.jigsaw_v0:MathJigsawV0", parallel=False, **attempts)  # v1 reads signs
    register("marft/MathJigsaw-v1", f"{math}.jigsaw_v1:MathJigsawV1", parallel=False, **attempts)
    register("marft/MathJigsaw-v2", f"{math}.jigsaw:MathJigsaw", parallel=False, **attempts)
    register("marft/MathJigsawSolo-v0", f"{math}.jigsaw_solo:MathJigsawSolo", parallel=True, gym=True, **attempts)  # the whole story
    # Booking draws a fresh world from each seed: no held-out split, no attempts.
    register("marft/Booking-v0", f"{booking}.coordinated:Booking", parallel=False)
    register("marft/BookingFixed-v0", f"{booking}.fixed:BookingFixed", parallel=False)
    register("marft/BookingDecPOMDP-v0", f"{booking}.decpomdp:BookingDecPOMDP", parallel=True)
    register("marft/CodeRepair-v0", f"{code}.chain:CodeRepairChain", parallel=False, **attempts)
    register("marft/CodeRepairVote-v0", f"{code}.vote:CodeRepairVote", parallel=True, **attempts)
    register("marft/CodeRepairSolo-v0", f"{code}.solo:CodeRepairSolo", parallel=True, gym=True, **attempts)
    register("marft/NumberDuel-v0", "marft_envs.tasks.games.duel:NumberDuel", parallel=True)


_register_builtin()

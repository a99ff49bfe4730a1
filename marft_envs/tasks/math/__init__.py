"""The MATH family: chain (reasoner -> actor), debate, solo, CORY and jigsaw envs over one problem interface.

Version history, one for the family's envs (each env's module docstring points here; when to add an id:
``docs/contract.md``, "Versioning"). Under each id, its changes, oldest first:
    ``marft/MathChain-v0``, ``marft/MathDebate-v0``, ``marft/MathSolo-v0``, ``marft/MathCORY-v0``:
        first release.
        fixes kept under the same id (the same observations and rewards on ordinary input): text
            crossing the env is valid UTF-8 (lone surrogates become U+FFFD); the grader reads sympy's
            ``\\left[\\begin{matrix}...\\end{matrix}\\right]`` (and ``\\left(...\\right)``) matrices as bmatrix
            (pmatrix), and its extraction is linear in the answer's length. Every step keeps the grader's
            time promise (0.1 s a call, ``marft_envs.rewards.math``): a response is read from its last
            65,536 characters and no exact value passes 4,096 bits; an action longer than the action
            space's 2^20 characters is refused (``EnvUsageError``), as is every misuse; in ``marft/MathChain-v0``,
            ``n_agents`` above 64 (``MAX_AGENTS``) or not an integer is refused in one line (it ran out of memory or
            failed deep inside).
        additions under the same id (default behaviour unchanged): ``profile="general-v0"`` selects
            role prompts written for general instruct models (the answer format stated plainly, one
            worked example); see ``marft_envs/tasks/math/profiles/``. ``problems="synthetic:0"``: level 1's
            wordings with numbers from 2 to 20 (opt-in; the default mix is unchanged).
        additions under the same id (default behaviour unchanged): ``format_reward=w`` (0 by default) adds
            ``w * rewards.format.boxed_format(action)`` to each answering agent's reward (component ``format``);
            ``difficulties()`` lists the problem source's levels and ``reset(options={"difficulty": d})`` plays one.
        additions under the same id (rewards unchanged): each round's infos carry ``shared_reward``
            (``marft_envs.outcomes.SHARED_REWARD``: the part of every agent's reward that all received alike,
            the team reward under ``credit="team"``), so the team's return counts it once, not once per agent.
        additions under the same id (default behaviour unchanged): ``profile="general-v1"``, general-v0 with each
            example laid out as the observation is (the teammate's working on its own line, ``reasoner_0: ...``) and the
            actor told to reply with the final ``\\boxed{}`` only.
        additions under the same id (default behaviour unchanged, issue 53): the problem sources take ``split_by``;
            these ids keep the split by uid (train and test; ``split="validation"`` is refused in one line), and the
            spec ``"synthetic-v0"`` names that split in any env.
    ``marft/MathJigsaw-v0``:
        first release (issue 35).
        fixes kept under the same id (the same observations and rewards on ordinary input): a sharer's message
            with a number over 4,300 digits is graded (0), where it stopped the env (``TaskError``). Kept
            registered for old results as ``marft_envs.tasks.math.jigsaw_v0.MathJigsawV0``.
        additions under the same id (default behaviour unchanged, issue 53): the problem sources take ``split_by``;
            these ids keep the split by uid (train and test; ``split="validation"`` is refused in one line), and the
            spec ``"synthetic-v0"`` names that split in any env.
    ``marft/MathJigsaw-v1``:
        a sharer's numbers are read with their sign (issue 51): ``-27``, ``−27`` or ``minus 27`` passed on for
            the share's 27 scores 0 (``own_correct``, its ``per_agent`` reward), where v0 read the digits alone
            and paid it; a minus sign written right before a number's digits is its sign (``44-14`` is 44 and
            -14), a spaced dash is punctuation. Observations, the team reward and the answerer's grading are v0's.
        Kept registered for old results as ``marft_envs.tasks.math.jigsaw_v1.MathJigsawV1``.
        additions under the same id (default behaviour unchanged, issue 53): the problem sources take ``split_by``;
            these ids keep the split by uid (train and test; ``split="validation"`` is refused in one line), and the
            spec ``"synthetic-v0"`` names that split in any env.
    ``marft/MathChain-v1``, ``marft/MathDebate-v1``, ``marft/MathSolo-v1``, ``marft/MathCORY-v1``, ``marft/MathJigsaw-v2``:
        the problems are split by their arithmetic (issue 53): a stable hash of the numbers (sorted) and the answer
            (``synthetic.arithmetic_key``) picks ``"train"``, ``"validation"`` (new) or ``"test"``, one key in ten each
            for test and validation, so no held-out problem's numbers and answer occur in train under any wording.
            The earlier ids split by uid, and templates sharing one arithmetic (``l0_gift`` and ``l0_harvest``: a+b)
            put the numbers and answer of 108 of level 0's 112 test problems in train. A seed draws other problems
            than under the earlier id; observations, rewards and grading are the earlier id's.
    ``marft/MathJigsawSolo-v0``:
        first release (issue 53): one solver sees the whole of a MathJigsaw-v2 story (the team's full-information
            bound); with the same ``n_shares``, ``levels`` and ``split`` its held-out stories are the team's own.
"""

from marft_envs.tasks.math.chain import MathChain
from marft_envs.tasks.math.chain_v0 import MathChainV0
from marft_envs.tasks.math.cory import MathCORY
from marft_envs.tasks.math.cory_v0 import MathCORYV0
from marft_envs.tasks.math.debate import MathDebate
from marft_envs.tasks.math.debate_v0 import MathDebateV0
from marft_envs.tasks.math.jigsaw import MathJigsaw
from marft_envs.tasks.math.jigsaw_solo import MathJigsawSolo
from marft_envs.tasks.math.jigsaw_v0 import MathJigsawV0
from marft_envs.tasks.math.jigsaw_v1 import MathJigsawV1
from marft_envs.tasks.math.solo import MathSolo
from marft_envs.tasks.math.solo_v0 import MathSoloV0

__all__ = [
    "MathCORY",
    "MathCORYV0",
    "MathChain",
    "MathChainV0",
    "MathDebate",
    "MathDebateV0",
    "MathJigsaw",
    "MathJigsawSolo",
    "MathJigsawV0",
    "MathJigsawV1",
    "MathSolo",
    "MathSoloV0",
]

"""A one-agent task with difficulty levels whose reward a random tiny model sometimes earns (for the signal tests).

Level 0: the reward is 1 when the response has an even number of characters (a coin flip for a random
model, so a group's rewards often differ); level 1: never rewarded. ``solved`` is reported.
"""

from marft_envs import FlexEnv, RoundResult


class ParityTask(FlexEnv):
    """solver_0 answers once; at level 0 an even-length answer wins, at level 1 nothing does."""

    metadata = {"name": "tests/Parity-v0", "is_parallelizable": True, "render_modes": ["ansi"]}
    reset_options = ("difficulty",)

    def __init__(self, levels: bool = True):
        super().__init__(["solver_0"])
        self.levels = levels

    def difficulties(self):
        return (0, 1) if self.levels else ()

    def reset_task(self, options):
        self.level = options.get("difficulty", int(self.np_random.integers(2)) if self.levels else 0)

    def observe_text(self, agent):
        return f"Level {self.level}: say something."

    def end_round(self, actions):
        win = self.level == 0 and len(actions["solver_0"]) % 2 == 0
        return RoundResult(rewards={"solver_0": float(win)}, terminations={"solver_0": True}, infos={"solver_0": {"solved": win}})


class FlatTask(ParityTask):
    """solver_0 answers once and is never rewarded: every group is uninformative (dynamic sampling never has enough)."""

    def __init__(self):
        super().__init__(levels=False)

    def end_round(self, actions):
        return RoundResult(rewards={"solver_0": 0.0}, terminations={"solver_0": True}, infos={"solver_0": {"solved": False}})

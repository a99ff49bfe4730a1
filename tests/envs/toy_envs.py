"""Small FlexEnvs used by the core tests: a chain, a Dec-POMDP, and a coordinator-driven graph."""

from marft_envs import DependencyGraph, FlexEnv, RoundResult


class Echo(FlexEnv):
    """Speaker says a word; listener must repeat it. Two rounds, chain graph."""

    metadata = {"name": "toy/Echo-v0", "is_parallelizable": False, "render_modes": ["ansi"]}

    def __init__(self, rounds=2, render_mode=None):
        super().__init__(["speaker_0", "listener_0"], render_mode=render_mode)
        self.rounds = rounds

    def reset_task(self, options):
        self.word = str(self.np_random.choice(["red", "green", "blue"]))

    def observe_text(self, agent):
        if agent == "speaker_0":
            return f"Say {self.word}."
        return f"Speaker: {self.round_actions.get('speaker_0', '')}"

    def round_graph(self):
        return DependencyGraph.chain(self.possible_agents)

    def end_round(self, actions):
        r = float(actions["listener_0"].strip() == self.word)
        done = self.round + 1 >= self.rounds
        return RoundResult(
            rewards={"speaker_0": r, "listener_0": r},
            terminations=dict.fromkeys(actions, done),
            infos={a: {"reward_components": {"match": r}} for a in actions},
        )


class Guess(FlexEnv):
    """Independent guessers (Dec-POMDP); guesser_1 stops after round 1, the others after round 3."""

    metadata = {"name": "toy/Guess-v0", "is_parallelizable": True, "render_modes": ["ansi"]}

    def __init__(self, n=3, render_mode=None):
        super().__init__([f"guesser_{k}" for k in range(n)], render_mode=render_mode)

    def reset_task(self, options):
        self.target = int(self.np_random.integers(0, 10))
        self.last = {}

    def observe_text(self, agent):
        return f"round {self.round}; your last guess: {self.last.get(agent, 'none')}"

    def end_round(self, actions):
        self.last.update(actions)
        rewards = {a: float(g.strip() == str(self.target)) for a, g in actions.items()}
        terms = {a: self.round >= 2 or (a == "guesser_1" and self.round >= 0) for a in actions}
        return RoundResult(rewards=rewards, terminations=terms)


class Coordinated(FlexEnv):
    """The coordinator acts first; its action ("a>b" or "b>a" or anything else) sets who sees whom."""

    metadata = {"name": "toy/Coordinated-v0", "is_parallelizable": False, "render_modes": ["ansi"]}

    def __init__(self, render_mode=None, cheat=False):
        super().__init__(["coordinator_0", "worker_0", "worker_1"], render_mode=render_mode)
        self.cheat = cheat  # gives an agent that already acted a new parent, which must be refused

    def reset_task(self, options):
        pass

    def observe_text(self, agent):
        parents = self.graph.parents(agent)
        return "; ".join(f"{p} said {self.round_actions[p]}" for p in parents if p in self.round_actions) or "go"

    def round_graph(self):
        c, a, b = self.possible_agents
        plan = self.round_actions.get(c)
        parents = {a: [c], b: [c]}
        if plan == "a>b" or (self.cheat and b in self.round_actions):
            parents[b] = [c, a]
        elif plan == "b>a":
            parents[a] = [c, b]
        return DependencyGraph.from_parents(self.possible_agents, parents)

    def end_round(self, actions):
        return RoundResult(rewards={a: 1.0 for a in actions}, terminations=dict.fromkeys(actions, True))

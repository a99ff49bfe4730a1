"""TextArena's multi-player games as FlexEnvs: ``marft/TextArena-<Game>-v0`` (textarena==0.7.4).

Each id wraps one TextArena game (its ``-raw`` variant: no TextArena wrappers) with agents
``player_0 .. player_{n-1}`` (TextArena's player ids). What the agents see and get is TextArena's:

- **Instructions**: the game's prompt for that player (TextArena's ``PROMPT`` messages).
- **Observation**: every other message TextArena sent that player, one per line as
  ``[GAME] ...`` / ``[Player k] ...`` (the last ``recent`` of them when ``recent`` is set), then a
  line saying whether it is this agent's turn.
- **Rewards**: TextArena's, given when the game ends (e.g. +1 win / -1 loss / 0 draw); until then 0.

**Turn order is the round graph.** A round is every player acting once, chained in the order they
act: the player TextArena asks to move acts first, each later agent sees the earlier moves. When
TextArena asks a player who has already acted this round (a retry after an invalid move) or the game
is over, the players who have not acted yet are still asked (every active agent acts every round,
as in ``marft/Booking-v0``): their observation says their reply is ignored, and it is. A strictly
alternating game with valid moves therefore wastes no step, except the rest of the last round.

Randomness: TextArena seeds Python's global ``random`` in ``reset``; each env here keeps its own
``random`` state and swaps it in around every TextArena call, so many envs stepped in turn (as a
trainer does) stay reproducible and leave the process's ``random`` as it was.

Registered only where ``textarena`` is importable (:func:`register_envs`, which ``marft`` calls
through this package's ``marft.envs`` entry point; or ``import marft_envs.adapters.textarena``).
``import marft_envs`` does not import textarena.

Options: ``game`` (a TextArena id), ``num_players``, ``recent`` (messages shown; None: all),
``max_rounds`` (a truncation limit on top of the game's own).

Version history:
    v0: first release (TextArena 0.7.4's ``<Game>-v0``).
"""

from __future__ import annotations

import importlib.util
from typing import Any

from marft_envs import outcomes
from marft_envs.adapters.isolated_random import IsolatedRandom
from marft_envs.core import FlexEnv, RoundResult
from marft_envs.graph import DependencyGraph
from marft_envs.registration import register

GAMES: dict[str, tuple[str, int]] = {
    "TicTacToe": ("TicTacToe-v0", 2),
    "ConnectFour": ("ConnectFour-v0", 2),
    "Nim": ("Nim-v0", 2),
    "KuhnPoker": ("KuhnPoker-v0", 2),
    "ThreePlayerTicTacToe": ("ThreePlayerTicTacToe-v0", 3),
}
"""marft id suffix -> (TextArena id, players): games that need no network and no LLM judge."""

IGNORED = "It is not your turn: your reply this round is ignored."
YOUR_TURN = "It is your turn."
GAME_OVER = "The game is over: your reply is ignored."


class TextArenaGame(FlexEnv):
    """One TextArena game; each round every player acts once, in TextArena's turn order."""

    metadata = {"name": "marft/TextArena-v0", "is_parallelizable": False, "render_modes": ["human", "ansi"]}
    reset_options = ()
    reward_structure = "general_sum"  # opponents: two-player games pay +1/-1, three players need not sum to 0

    def __init__(
        self,
        game: str = "TicTacToe-v0",
        num_players: int = 2,
        recent: int | None = None,
        max_rounds: int = 100,
        render_mode: str | None = None,
    ):
        if importlib.util.find_spec("textarena") is None:
            raise ImportError("TextArena envs need textarena: pip install 'marft[adapters]' (textarena==0.7.4)")
        import textarena

        if not isinstance(num_players, int) or num_players < 1:
            raise ValueError(f"num_players must be a positive int, got {num_players!r}")
        if recent is not None and (not isinstance(recent, int) or recent < 1):
            raise ValueError(f"recent must be None (all messages) or a positive int, got {recent!r}")
        if not isinstance(max_rounds, int) or max_rounds < 1:
            raise ValueError(f"max_rounds must be a positive int, got {max_rounds!r}")
        try:
            self.game = textarena.make(f"{game}-raw")
        except ValueError:
            raise ValueError(f"unknown TextArena game {game!r}; e.g. {sorted(g for g, _ in GAMES.values())}") from None
        super().__init__([f"player_{k}" for k in range(num_players)], render_mode=render_mode)
        self.metadata = {**type(self).metadata, "name": f"marft/TextArena-{game}"}
        self.game_id, self.num_players, self.recent, self.max_rounds = game, num_players, recent, max_rounds
        self._prompt_kind = textarena.ObservationType.PROMPT
        self.library_random = IsolatedRandom()  # TextArena draws from the global `random` (module docstring)

    # -- the task -----------------------------------------------------------------------------

    def reset_task(self, options: dict[str, Any]) -> None:
        seed = int(self.np_random.integers(2**31 - 1))
        self.library_random.forget()  # TextArena's reset seeds `random` itself
        self.library_random.run(lambda: self.game.reset(num_players=self.num_players, seed=seed))
        self.prompts: dict[str, list[str]] = {a: [] for a in self.possible_agents}
        self.messages: dict[str, list[str]] = {a: [] for a in self.possible_agents}
        self.moved: list[str] = []  # agents whose action this round was a real TextArena move
        self._collect()

    def instructions(self, agent: str) -> str:
        return "\n".join(self.prompts[agent])

    def observe_text(self, agent: str) -> str:
        shown = self.messages[agent][-self.recent :] if self.recent else self.messages[agent]
        if self.done:
            status = GAME_OVER
        elif agent == self.to_move() and agent not in self.round_actions:
            status = YOUR_TURN
        else:
            status = IGNORED
        return "\n".join([*shown, status])

    def round_graph(self) -> DependencyGraph:
        # A chain in acting order: who acted, then the player TextArena asks next, then everyone else.
        acted = list(self.round_actions)  # insertion order is acting order
        nxt = self.to_move()
        order = acted + ([nxt] if nxt is not None and nxt not in acted else [])
        order += [a for a in self.possible_agents if a not in order]
        return DependencyGraph.chain(order)

    def on_action(self, agent: str, action: str) -> None:
        if self.done or agent != self.to_move():
            return  # not this agent's turn (see the module docstring): the reply is ignored
        self.moved.append(agent)
        self.library_random.run(lambda: self.game.step(action))
        self._collect()

    def end_round(self, actions: dict[str, str]) -> RoundResult:
        moved, self.moved = self.moved, []
        if not self.done:
            cut = self.round + 1 >= self.max_rounds
            return RoundResult(truncations=dict.fromkeys(actions, cut), infos={a: {"moved_this_round": a in moved} for a in actions})
        scores = self.game.state.rewards or {}
        rewards = {a: float(scores.get(k, 0)) for k, a in enumerate(self.possible_agents)}
        infos = outcomes.outcome_infos(actions, own_correct={a: float(r > 0) for a, r in rewards.items()})
        for a in actions:
            infos[a]["moved_this_round"] = a in moved
            infos[a][outcomes.REWARD_COMPONENTS]["textarena"] = rewards[a]
        return RoundResult(rewards=rewards, terminations=dict.fromkeys(actions, True), infos=infos)

    def state_text(self) -> str:
        return "\n".join(self._line(sender, message) for sender, message in self.game.state.logs)

    def render_text(self) -> str:
        return self.state_text()

    # -- helpers ------------------------------------------------------------------------------

    @property
    def done(self) -> bool:
        """Whether TextArena's game has ended."""
        return bool(self.game.state.done)

    def to_move(self) -> str | None:
        """The agent TextArena asks to move now; None once the game is over."""
        return None if self.done else self.possible_agents[self.game.state.current_player_id]

    def _collect(self) -> None:
        # TextArena queues each player's new messages in state.observations until it is asked for
        # them (get_observation drains only the player to move); take every player's here, so that
        # observe_text is a pure query that sees them all.
        for pid, queued in self.game.state.observations.items():
            agent = self.possible_agents[pid]
            for sender, message, kind in queued:
                (self.prompts if kind == self._prompt_kind else self.messages)[agent].append(
                    message.strip() if kind == self._prompt_kind else self._line(sender, message)
                )
            self.game.state.observations[pid] = []

    def _line(self, sender: int, message: str) -> str:
        name = "GAME" if sender < 0 else f"Player {sender}"
        return f"[{name}] {message.strip()}"


def register_envs() -> list[str]:
    """Register ``marft/TextArena-<Game>-v0`` for every game in :data:`GAMES`, if textarena is importable."""
    if importlib.util.find_spec("textarena") is None:
        return []
    ids = []
    for name, (game, players) in GAMES.items():
        env_id = f"marft/TextArena-{name}-v0"
        register(env_id, TextArenaGame, kwargs={"game": game, "num_players": players})
        ids.append(env_id)
    return ids


register_envs()

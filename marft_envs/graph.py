"""The dependency graph of a Flex-POMDP round.

An edge ``i -> j`` means agent ``j`` sees agent ``i``'s action of the same round before it acts
(``D(a_i, a_j) = 1`` in the MARFT paper). Agents with no path between them act independently; a
graph with no edges is a plain Dec-POMDP round.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence


class GraphError(ValueError):
    """A dependency graph that is not a DAG over the given agents."""


class DependencyGraph:
    """Which agents see which other agents' actions within a round."""

    __slots__ = ("_agents", "_rank", "_parents", "_children", "_order")

    def __init__(self, agents: Sequence[str], parents: Mapping[str, Iterable[str]] | None = None):
        agents = tuple(agents)
        if len(set(agents)) != len(agents):
            dupes = sorted(a for a, n in Counter(agents).items() if n > 1)
            raise GraphError(f"duplicate agent ids {dupes}: each agent must appear once")
        known = set(agents)
        parents = dict(parents or {})
        for child, ps in parents.items():
            if child not in known:
                raise GraphError(f"unknown agent {child!r} in the graph; agents are {list(agents)}")
            for p in ps:
                if p not in known:
                    raise GraphError(f"unknown agent {p!r} listed as a parent of {child!r}; agents are {list(agents)}")
                if p == child:
                    raise GraphError(f"agent {child!r} depends on itself: a dependency cycle")
        # Parents and children are kept in `agents` order so that everything derived is deterministic.
        rank = {a: k for k, a in enumerate(agents)}
        self._agents = agents
        self._rank = rank
        self._parents = {a: tuple(sorted(set(parents.get(a, ())), key=rank.__getitem__)) for a in agents}
        children: dict[str, list[str]] = {a: [] for a in agents}
        for c in agents:  # children come out in agents order, as each child is visited in that order
            for p in self._parents[c]:
                children[p].append(c)
        self._children = {a: tuple(cs) for a, cs in children.items()}
        self._order = self._topological_order()

    # -- constructors ---------------------------------------------------------------------------

    @classmethod
    def empty(cls, agents: Sequence[str]) -> DependencyGraph:
        """No dependencies: every agent acts on its own observation (a Dec-POMDP round)."""
        return cls(agents)

    @classmethod
    def chain(cls, agents: Sequence[str]) -> DependencyGraph:
        """Each agent sees the previous one's action: ``agents[0] -> agents[1] -> ...``."""
        agents = tuple(agents)
        return cls(agents, {b: (a,) for a, b in zip(agents, agents[1:])})

    @classmethod
    def from_parents(cls, agents: Sequence[str], parents: Mapping[str, Iterable[str]]) -> DependencyGraph:
        """Build from ``{agent: [agents whose actions it sees]}``; unlisted agents have no parents."""
        return cls(agents, parents)

    @classmethod
    def from_matrix(cls, agents: Sequence[str], matrix: Sequence[Sequence[int]]) -> DependencyGraph:
        """Build from a 0/1 matrix where ``matrix[i][j] == 1`` means ``agents[j]`` sees ``agents[i]``."""
        agents = tuple(agents)
        n = len(agents)
        rows = [list(row) for row in matrix]
        if len(rows) != n or any(len(row) != n for row in rows):
            raise GraphError(f"the dependency matrix must be {n}x{n} for agents {list(agents)}")
        parents: dict[str, list[str]] = {a: [] for a in agents}
        for i, row in enumerate(rows):
            for j, v in enumerate(row):
                if v not in (0, 1, True, False):
                    raise GraphError(f"dependency matrix entries must be 0 or 1, got {v!r} at [{i}][{j}]")
                if v:
                    parents[agents[j]].append(agents[i])
        return cls(agents, parents)

    # -- queries --------------------------------------------------------------------------------

    @property
    def agents(self) -> tuple[str, ...]:
        """The agent ids, in the order given (ties in every ordering are broken by it)."""
        return self._agents

    def parents(self, agent: str) -> tuple[str, ...]:
        """Agents whose same-round actions ``agent`` sees before it acts."""
        return self._parents[self._check(agent)]

    def children(self, agent: str) -> tuple[str, ...]:
        """Agents that see ``agent``'s action before they act."""
        return self._children[self._check(agent)]

    def edges(self) -> list[tuple[str, str]]:
        """Every ``(parent, child)`` pair, in agent order."""
        return [(p, c) for c in self._agents for p in self._parents[c]]

    def is_empty(self) -> bool:
        """True when no agent depends on another (a Dec-POMDP round)."""
        return not any(self._parents.values())

    def order(self) -> tuple[str, ...]:
        """A topological order; among agents that could go next, the earliest in ``agents`` goes first."""
        return self._order

    def layers(self) -> list[tuple[str, ...]]:
        """Groups of agents that can act at the same time: each layer's parents are all in earlier layers."""
        depth: dict[str, int] = {}
        for a in self._order:
            depth[a] = 1 + max((depth[p] for p in self._parents[a]), default=-1)
        layers: list[list[str]] = [[] for _ in range(1 + max(depth.values(), default=-1))]
        for a in self._agents:
            layers[depth[a]].append(a)
        return [tuple(layer) for layer in layers]

    def matrix(self) -> list[list[int]]:
        """The 0/1 adjacency matrix: ``m[i][j] == 1`` when ``agents[j]`` sees ``agents[i]``."""
        index = {a: k for k, a in enumerate(self._agents)}
        m = [[0] * len(self._agents) for _ in self._agents]
        for p, c in self.edges():
            m[index[p]][index[c]] = 1
        return m

    def subgraph(self, agents: Iterable[str]) -> DependencyGraph:
        """The graph restricted to ``agents`` (e.g. the ones still active); edges to others are dropped."""
        keep = set(agents)
        kept = [a for a in self._agents if a in keep]
        return DependencyGraph(kept, {a: [p for p in self._parents[a] if p in keep] for a in kept})

    # -- internals ------------------------------------------------------------------------------

    def _check(self, agent: str) -> str:
        if agent not in self._parents:
            raise GraphError(f"unknown agent {agent!r}; agents are {list(self._agents)}")
        return agent

    def _topological_order(self) -> tuple[str, ...]:
        # Kahn's algorithm, always taking the earliest ready agent so the order is deterministic:
        # a heap of the ready agents' positions, and each agent's count of parents not yet placed,
        # so it costs O(E + n log n) (rescanning every agent for readiness was cubic on a full chain).
        waiting = {a: len(self._parents[a]) for a in self._agents}
        ready = [k for k, a in enumerate(self._agents) if not waiting[a]]
        heapq.heapify(ready)
        order: list[str] = []
        while ready:
            agent = self._agents[heapq.heappop(ready)]
            order.append(agent)
            for child in self._children[agent]:
                waiting[child] -= 1
                if not waiting[child]:
                    heapq.heappush(ready, self._rank[child])
        if len(order) < len(self._agents):
            raise GraphError(f"dependency cycle: {' -> '.join(self._find_cycle(set(order)))}")
        return tuple(order)

    def _find_cycle(self, done: set[str]) -> list[str]:
        # Every remaining agent has a remaining parent, so walking parents must revisit an agent.
        walk = [next(a for a in self._agents if a not in done)]
        while True:
            parent = next(p for p in self._parents[walk[-1]] if p not in done)
            if parent in walk:
                cycle = walk[walk.index(parent) :] + [parent]
                return cycle[::-1]  # print it in the direction actions flow
            walk.append(parent)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DependencyGraph) and self._agents == other._agents and self._parents == other._parents

    def __hash__(self) -> int:
        return hash((self._agents, tuple(self._parents.items())))

    def __repr__(self) -> str:
        edges = ", ".join(f"{p}->{c}" for p, c in self.edges()) or "no edges"
        return f"DependencyGraph({list(self._agents)}, {edges})"

    def __setattr__(self, name, value):
        if hasattr(self, "_order"):
            raise AttributeError("DependencyGraph is immutable: build a new one instead")
        object.__setattr__(self, name, value)

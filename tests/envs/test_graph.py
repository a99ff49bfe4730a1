"""DependencyGraph: constructors, orderings and errors, against hand-worked graphs."""

import pytest

from marft_envs.graph import DependencyGraph, GraphError

ABC = ["a", "b", "c"]


def test_chain():
    g = DependencyGraph.chain(ABC)
    assert g.parents("a") == () and g.parents("b") == ("a",) and g.parents("c") == ("b",)
    assert g.children("a") == ("b",)
    assert g.order() == ("a", "b", "c")
    assert g.layers() == [("a",), ("b",), ("c",)]
    assert g.matrix() == [[0, 1, 0], [0, 0, 1], [0, 0, 0]]
    assert not g.is_empty()


def test_empty_is_one_layer():
    g = DependencyGraph.empty(ABC)
    assert g.is_empty() and g.layers() == [("a", "b", "c")] and g.order() == ("a", "b", "c")
    assert g.matrix() == [[0] * 3] * 3


def test_order_breaks_ties_by_agent_order():
    # d has no parents but comes last in agent order; c depends on a only.
    g = DependencyGraph.from_parents(["c", "a", "b", "d"], {"c": ["a"], "b": ["a"]})
    assert g.order() == ("a", "c", "b", "d")
    assert g.layers() == [("a", "d"), ("c", "b")]


def test_diamond():
    g = DependencyGraph.from_parents(["a", "b", "c", "d"], {"b": ["a"], "c": ["a"], "d": ["c", "b"]})
    assert g.parents("d") == ("b", "c")  # kept in agent order, whatever order they were given in
    assert g.layers() == [("a",), ("b", "c"), ("d",)]
    assert g.edges() == [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")]


def test_matrix_round_trip():
    m = [[0, 1, 1], [0, 0, 1], [0, 0, 0]]
    g = DependencyGraph.from_matrix(ABC, m)
    assert g.parents("c") == ("a", "b")
    assert g.matrix() == m
    assert DependencyGraph.from_matrix(ABC, g.matrix()) == g


def test_subgraph_drops_edges_to_removed_agents():
    g = DependencyGraph.chain(ABC).subgraph(["a", "c"])
    assert g.agents == ("a", "c") and g.is_empty()


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: DependencyGraph.from_parents(ABC, {"a": ["c"], "b": ["a"], "c": ["b"]}), "cycle: a -> b -> c -> a"),
        (lambda: DependencyGraph.from_parents(ABC, {"a": ["a"]}), "'a' depends on itself"),
        (lambda: DependencyGraph.from_parents(ABC, {"b": ["zed"]}), "unknown agent 'zed' listed as a parent of 'b'"),
        (lambda: DependencyGraph.from_parents(ABC, {"zed": ["a"]}), "unknown agent 'zed'"),
        (lambda: DependencyGraph.from_matrix(ABC, [[0, 1], [0, 0]]), "must be 3x3"),
        (lambda: DependencyGraph.from_matrix(["a", "b"], [[0, 2], [0, 0]]), "must be 0 or 1"),
        (lambda: DependencyGraph(["a", "a"]), "duplicate agent ids ['a']"),
        (lambda: DependencyGraph.chain(ABC).parents("zed"), "unknown agent 'zed'"),
    ],
)
def test_errors_name_the_problem(build, message):
    with pytest.raises(GraphError) as err:
        build()
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_cycle_message_names_only_the_cycle():
    g_parents = {"b": ["a"], "c": ["b", "d"], "d": ["c"]}
    with pytest.raises(GraphError, match=r"cycle: (c -> d -> c|d -> c -> d)"):
        DependencyGraph.from_parents(["a", "b", "c", "d"], g_parents)


def test_immutable_and_hashable():
    g = DependencyGraph.chain(ABC)
    with pytest.raises(AttributeError):
        g._agents = ()
    assert hash(g) == hash(DependencyGraph.chain(ABC))
    assert {g: 1}[DependencyGraph.chain(ABC)] == 1
    assert "a->b" in repr(g)


def reference_order(agents, parents):
    """Kahn's algorithm as the docs state it: repeatedly the earliest agent whose parents have all acted."""
    done, order = set(), []
    while len(order) < len(agents):
        a = next(a for a in agents if a not in done and all(p in done for p in parents.get(a, ())))
        order.append(a)
        done.add(a)
    return tuple(order)


def test_order_layers_and_children_match_the_definitions_on_random_dags():
    import random

    rng = random.Random(0)
    for _ in range(200):
        n = rng.randint(1, 12)
        agents = [f"x{k}" for k in rng.sample(range(100), n)]
        position = rng.sample(range(n), n)  # a hidden topological order, unrelated to agent order
        before = {a: [b for b in agents if position[agents.index(b)] < position[agents.index(a)]] for a in agents}
        parents = {a: [b for b in before[a] if rng.random() < 0.3] for a in agents}
        g = DependencyGraph.from_parents(agents, parents)
        assert g.order() == reference_order(agents, parents)
        assert all(g.children(a) == tuple(c for c in agents if a in parents[c]) for a in agents)
        depth = {}
        for a in g.order():
            depth[a] = 1 + max((depth[p] for p in parents[a]), default=-1)
        assert g.layers() == [tuple(a for a in agents if depth[a] == k) for k in range(max(depth.values()) + 1)]


@pytest.mark.timeout(60)
def test_a_full_chain_of_a_thousand_agents_builds_in_linear_time_in_its_edges():
    # every agent sees all earlier ones (MathChain's graph): 499,500 edges; the readiness rescans of the
    # old topological sort made this cubic (26 s for marft/MathChain-v0 with n_agents=1000; now ~1 s)
    agents = [f"a{k}" for k in range(1000)]
    g = DependencyGraph.from_parents(agents, {a: agents[:k] for k, a in enumerate(agents)})
    assert g.order() == tuple(agents) and len(g.layers()) == 1000 and len(g.children("a0")) == 999

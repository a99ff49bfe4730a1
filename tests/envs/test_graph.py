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

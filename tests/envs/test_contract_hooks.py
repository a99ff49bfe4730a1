"""What the base class promises task authors: the ``on_action`` hook, valid text, and a clean state after a task raises."""

import pytest

from marft_envs import AECView, DependencyGraph, FlexEnv, FlexEnvError, RoundResult, TaskError
from marft_envs.text import valid_text


class Recorder(FlexEnv):
    """A coordinator, then two workers in one layer; records every hook call. ``fail`` names a method that raises."""

    metadata = {"name": "toy/Recorder-v0", "is_parallelizable": False, "render_modes": ["ansi"]}

    def __init__(self, fail: str | None = None, fail_round: int = 0):
        super().__init__(["coordinator_0", "worker_0", "worker_1"])
        self.fail, self.fail_round = fail, fail_round
        self.calls: list[tuple] = []

    def _maybe_fail(self, method: str) -> None:
        if self.fail == method and self.round == self.fail_round and self.round_actions:  # not in reset
            raise ValueError(f"{method} broke on purpose")

    def reset_task(self, options):
        self.calls = []
        self.said: list[str] = []

    def observe_text(self, agent):
        return " | ".join(f"{p}: {self.round_actions[p]}" for p in self.graph.parents(agent) if p in self.round_actions)

    def on_action(self, agent, action):
        self.calls.append(("on_action", agent, action, sorted(self.round_actions)))
        self._maybe_fail("on_action")
        self.said.append(action)

    def round_graph(self):
        self.calls.append(("round_graph",))
        self._maybe_fail("round_graph")
        c, a, b = self.possible_agents
        return DependencyGraph.from_parents(self.possible_agents, {a: [c], b: [c]})

    def end_round(self, actions):
        self.calls.append(("end_round", dict(actions)))
        self._maybe_fail("end_round")
        return RoundResult(rewards=dict.fromkeys(actions, 1.0), terminations=dict.fromkeys(actions, self.round >= 1))


def play_round(env):
    env.step({"coordinator_0": "go"})
    return env.step({"worker_1": "b", "worker_0": "a"})  # given out of order: the hook still runs in agents order


def test_on_action_runs_once_per_action_in_acting_order_before_the_graph_and_the_round_end():
    env = Recorder()
    env.reset(seed=0)
    play_round(env)
    hooks = [c for c in env.calls if c[0] != "round_graph"]
    assert hooks == [
        ("on_action", "coordinator_0", "go", ["coordinator_0"]),
        ("on_action", "worker_0", "a", ["coordinator_0", "worker_0"]),
        ("on_action", "worker_1", "b", ["coordinator_0", "worker_0", "worker_1"]),
        ("end_round", {"coordinator_0": "go", "worker_0": "a", "worker_1": "b"}),
    ]
    assert env.said == ["go", "a", "b"]


def test_queries_do_not_call_the_hook():
    env = Recorder()
    env.reset(seed=0)
    env.step({"coordinator_0": "go"})
    before = list(env.calls)
    for _ in range(3):
        env.round_graph()
        env.observe("worker_0")
        env.ready_agents()
        env.infos  # noqa: B018
    assert [c for c in env.calls[len(before) :] if c[0] != "round_graph"] == []


def test_the_hook_is_a_no_op_by_default():
    class Plain(FlexEnv):
        def __init__(self):
            super().__init__(["a_0"])

        def reset_task(self, options):
            pass

        def observe_text(self, agent):
            return ""

        def end_round(self, actions):
            return RoundResult(terminations={"a_0": True})

    env = Plain()
    env.reset(seed=0)
    assert env.on_action("a_0", "x") is None
    assert env.step({"a_0": "x"}).terminations == {"a_0": True}


@pytest.mark.parametrize("method, round_", [("end_round", 0), ("end_round", 1), ("on_action", 0), ("round_graph", 0)])
def test_a_task_method_that_raises_names_itself_abandons_the_episode_and_reset_works(method, round_):
    env = Recorder(fail=method, fail_round=round_)
    env.reset(seed=0)
    if round_ == 1:
        play_round(env)
    with pytest.raises(TaskError, match=rf"^Recorder\.{method} raised ValueError: {method} broke on purpose$") as info:
        play_round(env)
    assert isinstance(info.value.__cause__, ValueError)
    assert isinstance(info.value, RuntimeError)
    # the episode is over: nothing is ready, and a retry says why and what to do
    assert env.agents == [] and env.ready_agents() == [] and env.infos == {}
    with pytest.raises(FlexEnvError, match=rf"abandoned \(Recorder\.{method} raised ValueError.*call reset\(\)"):
        env.step({"worker_0": "again"})
    # reset() starts a fresh episode that plays to the end
    env.fail = None
    env.reset(seed=1)
    assert env.ready_agents() == ["coordinator_0"]
    play_round(env)
    assert play_round(env).terminations == dict.fromkeys(env.possible_agents, True)


def test_the_aec_view_resets_after_a_task_raised():
    aec = AECView(Recorder(fail="end_round"))
    aec.reset(seed=0)
    aec.step("go")
    aec.step("a")
    with pytest.raises(TaskError, match=r"Recorder\.end_round raised ValueError"):
        aec.step("b")
    aec.env.fail = None
    aec.reset(seed=0)
    for _ in range(20):
        if not aec.agents:
            break
        agent = aec.agent_selection
        aec.step(None if aec.terminations[agent] or aec.truncations[agent] else "x")
    assert aec.agents == [] and aec.env.round == 2


def test_a_contract_error_of_the_base_class_also_abandons_the_episode():
    class Cheat(Recorder):
        def round_graph(self):  # gives worker_1, which acted, a new parent once worker_0 has acted
            c, a, b = self.possible_agents
            late = b in self.round_actions and a not in self.round_actions
            return DependencyGraph.from_parents(self.possible_agents, {a: [c], b: [c, a] if late else [c]})

    env = Cheat()
    env.reset(seed=0)
    env.step({"coordinator_0": "go"})
    with pytest.raises(ValueError, match="cannot gain parents"):
        env.step({"worker_1": "b"})
    with pytest.raises(FlexEnvError, match="abandoned .*call reset"):
        env.step({"worker_0": "a"})
    env.reset(seed=0)
    assert env.ready_agents() == ["coordinator_0"]


def test_a_reset_that_raises_leaves_the_env_unstarted_until_a_good_reset():
    class Picky(Recorder):
        def reset_task(self, options):
            if options.get("bad"):
                raise ValueError("options['bad'] is not allowed")
            super().reset_task(options)

    env = Picky()
    env.reset(seed=0)
    env.step({"coordinator_0": "go"})
    with pytest.raises(ValueError, match="not allowed"):  # the task's own one-line error, unchanged
        env.reset(seed=0, options={"bad": True})
    with pytest.raises(FlexEnvError, match="call reset"):
        env.step({"worker_0": "a"})
    env.reset(seed=0)
    assert env.ready_agents() == ["coordinator_0"]


# -- valid text --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("plain", "plain"),
        ("é 😀 \x00 \n", "é 😀 \x00 \n"),
        ("a\ud800b", "a\ufffdb"),  # a lone high surrogate
        ("\udc00", "\ufffd"),  # a lone low surrogate
        ("\ud83d\ude00", "😀"),  # a pair given as two code points is the character
        ("\ud800\ud83d\ude00", "\ufffd😀"),
    ],
)
def test_valid_text(text, expected):
    assert valid_text(text) == expected
    valid_text(text).encode("utf-8")


def test_actions_and_observations_are_valid_text():
    env = Recorder()
    env.reset(seed=0)
    env.step({"coordinator_0": "plan \ud800 x"})
    assert env.round_actions["coordinator_0"] == "plan \ufffd x"  # what the task sees
    assert env.said == ["plan \ufffd x"]
    assert env.observe("worker_0")["text"] == "coordinator_0: plan \ufffd x"


def test_observations_and_state_a_task_builds_from_bad_text_are_made_valid():
    class Leaky(Recorder):
        def observe_text(self, agent):
            return "decoded: \udfff"

        def instructions(self, agent):
            return "role \ud800"

        def state_text(self):
            return "state \ud800"

    env = Leaky()
    env.reset(seed=0)
    assert env.observe("worker_0") == {"instructions": "role \ufffd", "text": "decoded: \ufffd"}
    assert env.state() == "state \ufffd"
    aec = AECView(Leaky())
    aec.reset(seed=0)
    assert aec.state() == "state \ufffd" and aec.observe("worker_0")["text"] == "decoded: \ufffd"


# -- check_env: queries are pure ---------------------------------------------------------------------


def test_check_env_catches_a_graph_query_with_a_side_effect():
    from marft_envs.testing import check_env, check_pure_queries
    from marft_envs.testing.checks import random_policy

    class Impure(Recorder):
        def reset_task(self, options):
            super().reset_task(options)
            self.asked = 0

        def round_graph(self):
            self.asked += 1  # a side effect in a query: what booking's graph did before on_action existed
            return super().round_graph()

        def observe_text(self, agent):
            return f"asked {self.asked}"

    with pytest.raises(AssertionError, match="queries must not change the state"):
        check_pure_queries(Impure, range(2), random_policy)
    assert "marft.pure_queries" in check_env(Recorder, seeds=range(3)).passed


@pytest.mark.parametrize(
    "env_id, good, bad, hint",
    [
        ("marft/MathChain-v0", {}, {"problme": None}, "did you mean 'problem'?"),
        ("marft/MathCORY-v0", {"pioneer": "solver_1"}, {"pionner": "solver_1"}, "did you mean 'pioneer'?"),
        ("marft/BookingFixed-v0", {"kind": "book"}, {"kinds": "book"}, "did you mean 'kind'?"),
        ("marft/CodeRepairSolo-v0", {}, {"tsk": None}, "did you mean 'task'?"),
    ],
)
def test_a_misspelt_reset_option_warns_naming_the_closest(env_id, good, bad, hint):
    import warnings

    import marft_envs
    from marft_envs.core import UnknownOptionWarning

    env = marft_envs.make(env_id)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the options a task reads are silent
        env.reset(seed=0, options=good)
    with pytest.warns(UnknownOptionWarning, match=rf"unknown option {next(iter(bad))!r} is ignored; {hint}"):
        env.reset(seed=0, options=bad)

"""Held-out evaluation: per-role diagnostics and the before/after table on hand-made episodes, and the
evaluation contract (what an env's registry entry declares, and what evaluation builds from it)."""

import json

import pytest
import torch

import marft_envs
from marft_agents.rollout.episode import AgentStep, Episode
from marft_agents.rollout.evaluation import HELDOUT_SEED, PROTOCOLS, eval_plan, evaluate, role_diagnostics, summarize
from marft_agents.runs.report import summary_table
from marft_envs import FlexEnv, RoundResult


def _step(agent: str, n_tokens: int, own: bool | None, *, done: bool = False) -> AgentStep:
    info = {} if own is None else {"reward_components": {"own_correct": float(own)}}
    return AgentStep(
        episode=0,
        round=0,
        agent=agent,
        prompt=[1],
        response=[5] * n_tokens,
        token_logps=torch.zeros(n_tokens),
        text="x",
        reward=float(done and bool(own)),
        round_end=done,
        done=done,
        info=info,
    )


def _episode(reasoner: tuple[int, bool], actor: tuple[int, bool]) -> Episode:
    steps = [_step("reasoner_0", *reasoner), _step("actor_0", *actor, done=True)]
    return Episode(index=0, steps=steps, solved=actor[1])


# (reasoner tokens, right), (actor tokens, right) per episode
EPISODES = [((10, True), (4, True)), ((6, True), (4, False)), ((2, False), (4, False)), ((2, False), (6, True))]


def test_role_diagnostics_by_hand():
    roles = role_diagnostics([_episode(*e) for e in EPISODES])
    assert roles["reasoner_0"]["mean_response_tokens"] == pytest.approx((10 + 6 + 2 + 2) / 4)
    assert roles["actor_0"]["mean_response_tokens"] == pytest.approx((4 + 4 + 4 + 6) / 4)
    assert roles["reasoner_0"]["own_accuracy"] == pytest.approx(0.5)
    assert roles["actor_0"]["own_accuracy"] == pytest.approx(0.5)
    # the actor was right in 1 of the 2 episodes where the reasoner was right, and 1 of the 2 where it was wrong
    assert roles["reasoner_0"]["answer_accuracy_when_right"] == pytest.approx(0.5)
    assert roles["reasoner_0"]["answer_accuracy_when_wrong"] == pytest.approx(0.5)
    assert roles["reasoner_0"]["n_right"] == roles["reasoner_0"]["n_wrong"] == 2


def test_role_diagnostics_without_reward_components_still_reports_lengths():
    episodes = [Episode(0, [_step("a", 3, None, done=True)], solved=False)]
    assert role_diagnostics(episodes) == {"a": {"mean_response_tokens": 3.0}}


def test_summary_table_shows_percentages_and_lengths():
    before = summarize([_episode(*e) for e in EPISODES])
    after = summarize([_episode((12, True), (4, True))] * 4)
    table = summary_table({"eval_before": before, "eval_after": after, "updates": 3, "wall_time_s": 90.0})
    lines = table.splitlines()
    assert lines[1].split()[-2:] == ["50.0%", "100.0%"]
    length_row = next(line for line in lines if line.startswith("reasoner_0 response length"))
    assert length_row.split()[-2:] == ["5.0", "12.0"]
    assert lines[-1].endswith("3 updates in 1.5 min")


# -- the evaluation contract: what the registry declares, evaluation reads --------------------------

# The first held-out problems of the MATH and code envs, recorded before the contract was declared:
# evaluation must keep drawing exactly these (and seeding episode i with HELDOUT_SEED + i).
FIRST_HELDOUT = {
    "marft/MathChain-v0": ["l1_compare:6,5", "l1_harvest:11,42", "l4_uneven:18,8"],
    "marft/CodeRepair-v0": ["corpus/clamp/2", "corpus/majority_element/1", "corpus/insertion_sort/1"],
}


@pytest.mark.parametrize(
    "env_id, rounds, protocol",
    [
        ("marft/MathChain-v0", 1, "single_pass"),
        ("marft/MathChain-v0", 3, "attempts_with_feedback"),
        ("marft/MathSolo-v0", 2, "attempts_with_feedback"),
        ("marft/MathCORY-v0", 1, "single_pass"),
        ("marft/CodeRepair-v0", 3, "attempts_with_feedback"),
        ("marft/CodeRepairVote-v0", 1, "single_pass"),
    ],
)
def test_attempts_envs_are_evaluated_on_the_test_split_with_rounds_as_attempts(env_id, rounds, protocol):
    plan = eval_plan(env_id, {"split": "train", "rounds": 5, "credit": "last"}, rounds)
    assert plan.env_kwargs == {"split": "test", "rounds": rounds, "credit": "last"}
    assert (plan.heldout, plan.protocol, plan.attempts) == (True, protocol, rounds)
    assert marft_envs.make(env_id, **plan.env_kwargs).max_rounds == rounds


def test_the_debate_is_held_out_but_its_rounds_are_not_attempts():
    plan = eval_plan("marft/MathDebate-v0", {"n_agents": 2, "rounds": 3})
    assert plan.env_kwargs == {"n_agents": 2, "rounds": 3, "split": "test"}  # its own debate rounds, untouched
    assert (plan.heldout, plan.protocol, plan.attempts) == (True, "as_configured", None)
    with pytest.raises(
        ValueError,
        match=r"^marft/MathDebate-v0 has no attempts-with-feedback option: evaluate "
        r"it with rounds=1$",
    ):
        eval_plan("marft/MathDebate-v0", {}, 3)


@pytest.mark.parametrize("env_id", ["marft/Booking-v0", "marft/BookingFixed-v0", "marft/BookingDecPOMDP-v0"])
def test_booking_has_no_heldout_split_and_no_attempts(env_id):
    plan = eval_plan(env_id, {"max_rounds": 4})
    assert plan == type(plan)({"max_rounds": 4}, False, "as_configured", None)
    with pytest.raises(ValueError, match="has no attempts-with-feedback option"):
        eval_plan(env_id, {}, 2)


class Counting(FlexEnv):
    """One agent; its limit is called ``tries``, not ``rounds``."""

    metadata = {"name": "test/Counting-v0", "is_parallelizable": True, "render_modes": ["ansi"]}

    def __init__(self, tries: int = 1, split: str = "train"):
        super().__init__(["counter_0"])
        self.tries, self.split = tries, split

    def reset_task(self, options):
        self.target = options.get("target", int(self.np_random.integers(10)))

    def observe_text(self, agent):
        return f"Count to {self.target}."

    def heldout_options(self, n, seed):
        return [{"target": 100 + k} for k in range(min(n, 2))]

    def end_round(self, actions):
        return RoundResult(terminations={"counter_0": self.round + 1 >= self.tries})


@pytest.fixture
def scratch_registry(monkeypatch):
    """Registrations made by a test leave the registry as it was (other tests list every env)."""
    from marft_envs import registration

    monkeypatch.setattr(registration, "_registry", dict(registration._registry))


@pytest.mark.usefixtures("scratch_registry")
def test_an_undeclared_env_is_evaluated_as_configured_and_never_on_a_guessed_split():
    marft_envs.register("test/Counting-v0", Counting)
    plan = eval_plan("test/Counting-v0", {"tries": 2})
    assert plan == type(plan)({"tries": 2}, False, "as_configured", None)  # no split=test, no rounds=
    with pytest.raises(ValueError, match="test/Counting-v0 has no attempts-with-feedback option"):
        eval_plan("test/Counting-v0", {}, rounds=3)


@pytest.mark.usefixtures("scratch_registry")
def test_an_env_declares_its_own_attempts_option_and_heldout_episodes():
    marft_envs.register("test/CountingHeldout-v0", Counting, eval_kwargs={"split": "test"}, attempts_option="tries")
    entry = marft_envs.spec("test/CountingHeldout-v0")
    assert (entry.eval_kwargs, entry.attempts_option) == ({"split": "test"}, "tries")
    plan = eval_plan("test/CountingHeldout-v0", {}, rounds=3)
    assert plan == type(plan)({"split": "test", "tries": 3}, True, "attempts_with_feedback", 3)
    env = marft_envs.make("test/CountingHeldout-v0", **plan.env_kwargs)
    assert (env.split, env.tries) == ("test", 3)
    assert env.heldout_options(5, HELDOUT_SEED) == [{"target": 100}, {"target": 101}]


@pytest.mark.usefixtures("scratch_registry")
def test_register_refuses_an_attempts_option_that_is_not_a_name():
    with pytest.raises(ValueError, match="attempts_option must be the name of a constructor option"):
        marft_envs.register("test/Bad-v0", Counting, attempts_option="two words")


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_rounds_must_be_a_positive_integer(bad):
    with pytest.raises(ValueError, match="rounds must be an integer of at least 1"):
        eval_plan("marft/MathChain-v0", {}, bad)


@pytest.mark.parametrize("env_id", sorted(FIRST_HELDOUT))
def test_the_heldout_problems_are_the_ones_evaluation_always_used(env_id):
    plan = eval_plan(env_id, {})
    env = marft_envs.make(env_id, **plan.env_kwargs)
    options = env.heldout_options(20, HELDOUT_SEED)
    ids = [getattr(o["problem"], "uid", None) or o["problem"].task_id for o in options]
    assert ids[:3] == FIRST_HELDOUT[env_id] and len(set(ids)) == len(ids) == 20
    assert [o["problem"] for o in options] == env.problems.heldout(20, seed=HELDOUT_SEED)


def test_the_default_heldout_options_let_the_seeds_pick_the_episodes():
    class Plain(FlexEnv):
        def __init__(self):
            super().__init__(["a_0"])

    assert Plain().heldout_options(3, 0) == [{}, {}, {}]


@pytest.mark.parametrize(
    "env_id, env_kwargs, rounds, expected",
    [
        ("marft/MathChain-v0", {}, 2, (True, "attempts_with_feedback", 2)),
        ("marft/MathDebate-v0", {"n_agents": 2, "rounds": 1}, 1, (True, "as_configured", None)),
    ],
)
def test_evaluate_says_which_protocol_it_used(env_id, env_kwargs, rounds, expected, tiny_model_dir):
    from marft_agents.models.policy import LaMASPolicy, load_base

    model, tokenizer = load_base(str(tiny_model_dir))
    policy = LaMASPolicy(model, tokenizer, marft_envs.make(env_id, **env_kwargs).possible_agents)
    result = evaluate(policy, env_id, env_kwargs, 2, rounds=rounds, max_new_tokens=3)
    assert (result["heldout"], result["protocol"], result["attempts"]) == expected
    assert result["protocol"] in PROTOCOLS
    assert {"episodes", "accuracy", "accuracy_stderr", "mean_return", "mean_rounds", "roles"} <= set(result)
    assert result["episodes"] == 2


def test_max_cycles_does_not_override_the_evaluated_attempts():
    plan = eval_plan("marft/MathChain-v0", {"max_cycles": 3}, rounds=1)
    assert "max_cycles" not in plan.env_kwargs and plan.env_kwargs["rounds"] == 1 and plan.protocol == "single_pass"


def test_a_task_that_declares_mean_return_gets_it_as_its_headline():
    from marft_agents.rollout.evaluation import EvalPlan, eval_result
    from marft_agents.runs.report import headline

    plan = EvalPlan({}, True, "single_pass", 1, "mean_return")
    result = eval_result([], plan)
    assert result["headline_metric"] == "mean_return"
    key, label = headline({**result, "success_reported": True})
    assert key == "mean_return" and "partial credit" in label
    assert headline({**result, "headline_metric": "accuracy", "success_reported": True})[0] == "accuracy"


class _E:
    def __init__(self, index, reward):
        self.index = index
        self.steps = [type("S", (), {"reward": reward})()]


@pytest.mark.parametrize(
    "rewards, n, kept",
    [
        ([1, 0, 1, 0, 1, 0, 1, 0], 4, [0, 1, 2, 3]),  # half and half, in index order
        ([0, 0, 0, 1, 0, 0, 0, 0], 4, [0, 1, 2, 3]),  # one rewarded: it and the first three others
        ([0, 0, 0, 0, 0, 0, 0, 1], 3, [0, 1, 7]),  # the rewarded one is kept although it comes last
        ([1, 1, 1, 1, 1, 0], 4, [0, 1, 2, 5]),  # one unrewarded: the rewarded fill the rest
        ([0, 0], 6, [0, 1]),  # fewer episodes than asked
        ([1, 0, 1], 0, []),
    ],
)
def test_transcripts_keep_rewarded_and_unrewarded_episodes(rewards, n, kept):
    from marft_agents.rollout.evaluation import pick_transcripts

    episodes = [_E(i, r) for i, r in enumerate(rewards)]
    assert [e.index for e in pick_transcripts(episodes, n)] == kept


def test_eval_takes_threads_and_token_limits_writes_transcripts_and_show_filters(tmp_path, tiny_model_dir, capsys):
    from marft_agents.cli import main as cli

    out = tmp_path / "eval.jsonl"
    threads = torch.get_num_threads()
    try:
        assert (
            cli(
                [
                    "eval",
                    "--model",
                    str(tiny_model_dir),
                    "--episodes",
                    "6",
                    "threads=1",
                    "max_new_tokens=8",
                    "--transcripts",
                    str(out),
                    "--transcripts-n",
                    "4",
                ]
            )
            == 0
        )
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(threads)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 4 and all(len(s["action"]) < 200 for r in rows for s in r["steps"])
    capsys.readouterr()
    assert cli(["show", str(out), "--reward", "unrewarded"]) == 0
    shown = capsys.readouterr().out
    assert shown.count("=== ") == sum(r["return"] == 0 for r in rows)
    assert cli(["eval", "--model", str(tiny_model_dir), "lr=1"]) == 2  # other keys are refused in one line
    assert "takes generation.* and eval.* keys and threads, max_new_tokens, stop, dtype" in capsys.readouterr().err


def test_an_evaluation_only_run_evaluates_once_and_trains_nothing(tmp_path, tiny_model_dir):
    from marft_agents.cli import main as cli

    run = tmp_path / "run"
    assert (
        cli(
            [
                "train",
                f"model={tiny_model_dir}",
                "updates=0",
                "eval_episodes=4",
                "eval_rounds=0",
                "eval_transcripts=2",
                f"run_dir={run}",
                "--no-progress",
            ]
        )
        == 0
    )
    summary = json.loads((run / "summary.json").read_text())
    assert summary["eval_after"] == summary["eval_before"] and summary["updates"] == 0
    assert len((run / "samples" / "eval_before.jsonl").read_text().splitlines()) == 2
    assert not list((run / "checkpoints").glob("*.pt")) if (run / "checkpoints").exists() else True

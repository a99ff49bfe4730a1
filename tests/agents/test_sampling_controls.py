"""Top-k, top-p and stop strings (``top_k``, ``top_p``, ``stop``; per agent ``agents.<agent_id>.*``), and evaluation's
own sampling (``eval.*``): what is drawn respects each setting, and the learner scores the distribution that drew it.
"""

import pytest
import torch

import marft_envs
from marft_agents.engines.config import EvalSampling
from marft_agents.engines.hf import HFEngine
from marft_agents.engines.seeded import EpisodeSeededEngine
from marft_agents.models import lm
from marft_agents.models.policy import LaMASPolicy, load_base
from marft_agents.models.sampling import Sampling, agent_sampling, row_temperatures
from marft_agents.models.truncation import truncate
from marft_agents.rollout.evaluation import HELDOUT_SEED, episode_options, eval_plan, eval_sampling, evaluate
from marft_agents.rollout.layered import RolloutEngine
from marft_agents.training.config import ConfigError, load, validate
from marft_agents.training.setup import learner_temperature, training_sampling, worker_spec

CHAIN = "marft/MathChain-v0"
AGENTS = ["reasoner_0", "actor_0"]
TOLERANCE = 1e-5
"""Behaviour vs learner log-probs in float32 (the same truncation on the same logits)."""


@pytest.fixture(scope="module")
def policy(tiny_model_dir):
    torch.manual_seed(0)  # LoRA's A matrices are drawn at construction
    model, tokenizer = load_base(str(tiny_model_dir))
    return LaMASPolicy(model, tokenizer, AGENTS)


@pytest.fixture(scope="module")
def prompts(policy):
    env = marft_envs.make(CHAIN)
    out = []
    for seed in range(4):
        env.reset(seed=seed)
        out.append(policy.prompt(env.observe("reasoner_0")))
    return out


def teacher_forced_logits(model, prompt, response, temperature):
    """``(len(response), V)``: the logits that predicted each response token, divided by ``temperature``."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt + response])).logits[0, len(prompt) - 1 : -1]
    return logits.float() / temperature


def ranks(logits, tokens):
    """Each token's rank (0: the likeliest) in its row of ``logits``."""
    return (logits > logits.gather(-1, tokens[:, None])).sum(-1)


# -- the decode loop -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("top_k, top_p", [(4, 1.0), (0, 0.6), (6, 0.8)])
def test_lm_generate_logps_equal_a_teacher_forced_recompute_under_truncation(tiny_model_dir, top_k, top_p):
    model, tok = load_base(str(tiny_model_dir))
    prompts = [[5, 6, 7, 8], [9, 10], [11, 12, 13]]
    torch.manual_seed(0)
    responses, token_logps = lm.generate(
        model,
        prompts,
        temperature=0.8,
        max_new_tokens=10,
        top_k=top_k,
        top_p=top_p,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
    )
    untruncated = []
    for prompt, response, logps in zip(prompts, responses, token_logps):
        scaled = teacher_forced_logits(model, prompt, response, 0.8)  # (R, V)
        target = torch.tensor(response)
        kept = truncate(scaled, top_k or None, top_p if top_p < 1 else None)
        torch.testing.assert_close(torch.log_softmax(kept, -1).gather(-1, target[:, None])[:, 0], logps, atol=TOLERANCE, rtol=0)
        untruncated.append((torch.log_softmax(scaled, -1).gather(-1, target[:, None])[:, 0] - logps).abs().max())
        if top_k:  # every drawn token is among the top_k likeliest
            assert ranks(scaled, target).max() < top_k
        if top_p < 1:  # ... and the mass of the tokens likelier than it is below top_p
            probs = torch.softmax(truncate(scaled, top_k or None, None), -1)
            before = (probs * (probs > probs.gather(-1, target[:, None]))).sum(-1)
            assert before.max() < top_p
    assert max(untruncated) > 1e-3  # the control: the untruncated distribution's log-probs are other numbers


@pytest.mark.parametrize("knob", [{"top_k": 1}, {"top_p": 1e-6}])
def test_top_k_1_and_a_tiny_top_p_draw_the_greedy_tokens(policy, prompts, knob):
    greedy = policy.generate(prompts, "reasoner_0", Sampling(0.0, 12))
    torch.manual_seed(0)
    drawn = policy.generate(prompts, "reasoner_0", Sampling(1.0, 12, **knob))
    assert drawn.responses == greedy.responses
    assert all(torch.equal(lp, torch.zeros_like(lp)) for lp in drawn.token_logps)  # one token kept: probability 1


@pytest.fixture(scope="module")
def embedded():
    """The shipped model, whose reasoner writes ``2/7*5=10/7`` greedy for episode 0 (a token per character)."""
    model, tokenizer = load_base("embedded")
    policy = LaMASPolicy(model, tokenizer, AGENTS)
    env = marft_envs.make(CHAIN)
    env.reset(seed=0)
    return policy, policy.prompt(env.observe("reasoner_0"))


@pytest.mark.parametrize("stop, kept", [(("=",), "2/7*5="), (("=1",), "2/7*5=1"), (("*5", "/7"), "2/7")])
def test_a_stop_string_ends_the_response_at_the_token_completing_it(embedded, stop, kept):
    policy, prompt = embedded
    full = policy.generate([prompt], "reasoner_0", Sampling(0.0, 24))
    assert full.texts == ["2/7*5=10/7"]
    greedy = policy.generate([prompt], "reasoner_0", Sampling(0.0, 24, stop=stop))
    assert greedy.texts == [kept] and greedy.responses[0] == full.responses[0][: len(kept)]  # that token kept: drawn
    torch.manual_seed(0)
    sampled = policy.generate([prompt] * 8, "reasoner_0", Sampling(1.0, 24, stop=stop))
    for response in sampled.responses:  # each ends at its first stop, or at its end of turn
        decoded = [policy.tokenizer.decode(response[: j + 1], skip_special_tokens=True) for j in range(len(response))]
        first = next((j for j, t in enumerate(decoded) if any(s in t for s in stop)), None)
        assert first == len(response) - 1 or (first is None and (response[-1] == policy.eos_token_id or len(response) == 24))
    assert any(any(s in t for s in stop) for t in sampled.texts)  # some did stop there


# -- the PPO ratio: behaviour log-probs are the learner's scores -------------------------------------------------------


@pytest.mark.parametrize(
    "sampling", [Sampling(0.9, 12, top_k=5), Sampling(0.7, 12, top_p=0.7), Sampling(1.0, 12, top_k=8, top_p=0.9, stop=("1",))]
)
def test_truncated_samplings_ratio_is_1_on_an_unchanged_policy(policy, prompts, sampling):
    torch.manual_seed(0)
    gen = policy.generate(prompts, "actor_0", sampling)
    scoring = row_temperatures(["actor_0"] * len(prompts), {"reasoner_0": 0.5, "actor_0": sampling}, policy.device)
    logp, _, mask = policy.score(prompts, gen.responses, "actor_0", scoring)
    plain, _, _ = policy.score(prompts, gen.responses, "actor_0", sampling.temperature)
    for i, response in enumerate(gen.responses):
        assert len(response) == len(gen.token_logps[i]) >= 1
        torch.testing.assert_close(logp[i][mask[i]], gen.token_logps[i], atol=TOLERANCE, rtol=0)
    gaps = [(plain[i][mask[i]] - gen.token_logps[i]).abs().max() for i in range(len(prompts))]
    assert max(gaps) > 1e-3  # the control: scored untruncated, the ratio would not be 1


def test_learner_scores_truncated_agents_with_their_whole_sampling_and_others_as_before():
    assert learner_temperature(load(), AGENTS) == 0.7  # nothing truncates: the numbers of every run before
    assert learner_temperature(load(overrides=["agents.actor_0.temperature=0.3"]), AGENTS) == {"reasoner_0": 0.7, "actor_0": 0.3}
    assert learner_temperature(load(overrides=['stop=["\\n"]']), AGENTS) == 0.7  # a stop string changes no log-prob
    config = load(overrides=["agents.reasoner_0.top_k=1", "agents.actor_0.top_p=0.9", "agents.actor_0.temperature=0.5"])
    assert learner_temperature(config, AGENTS) == {"reasoner_0": Sampling(0.7, 48, top_k=1), "actor_0": Sampling(0.5, 48, top_p=0.9)}
    run = load(overrides=["top_p=0.95"])
    assert learner_temperature(run, AGENTS) == {a: Sampling(0.7, 48, top_p=0.95) for a in AGENTS}


# -- settings: per agent, validated, to every engine ---------------------------------------------------------------


def test_agent_sampling_carries_each_agents_own_and_greedy_keeps_only_limits_and_stops():
    base = Sampling(0.7, 48, top_p=0.9, stop=("#",))
    own = agent_sampling(base, {"a": 0.5}, {"b": 3}, top_k={"c": 2}, top_p={"a": 0.5}, stop={"b": ["\n"]})
    assert own == {
        "a": Sampling(0.5, 48, top_p=0.5, stop=("#",)),
        "b": Sampling(0.7, 3, top_p=0.9, stop=("\n",)),
        "c": Sampling(0.7, 48, top_k=2, top_p=0.9, stop=("#",)),
    }
    greedy = agent_sampling(Sampling(0.0, 48), {"a": 0.5}, {"b": 3}, top_k={"c": 2}, top_p={"a": 0.5}, stop={"a": ["\n"]})
    assert greedy == {"a": Sampling(0.0, 48, stop=("\n",)), "b": Sampling(0.0, 3)}
    assert eval_sampling(EvalSampling(temperature=0.0, top_k=5), 16, {"b": 3}, ("#",), {"a": ["!"]}) == (
        Sampling(0.0, 16, stop=("#",)),  # greedy draws nothing: no top-k to carry
        {"b": Sampling(0.0, 3, stop=("#",)), "a": Sampling(0.0, 16, stop=("!",))},
    )


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["top_k=-1"], "top_k must be >= 0, got -1"),
        (["top_k=2.5"], "top_k must be a int, got 2.5"),
        (["top_p=0"], "top_p must be in (0, 1], got 0.0"),
        (["top_p=1.5"], "top_p must be in (0, 1], got 1.5"),
        (['stop=[""]'], "stop must be a list of non-empty strings"),
        (["stop=###"], "stop must be a list, got '###'"),
        (["agents.actor_0.top_k=-2"], "agents.actor_0.top_k must be >= 0, got -2"),
        (["agents.actor_0.top_p=0"], "agents.actor_0.top_p must be in (0, 1], got 0.0"),
        (["agents.actor_0.stop=[3]"], "agents.actor_0.stop must be a list of non-empty strings"),
        (["eval.temperature=0.0001"], "eval.temperature must be 0 (greedy) or >= 0.001, got 0.0001"),
        (["eval.top_p=2"], "eval.top_p must be in (0, 1], got 2.0"),
        (["eval.top_k=-1"], "eval.top_k must be >= 0, got -1"),
    ],
)
def test_bad_sampling_settings_are_refused_in_one_line(overrides, message):
    with pytest.raises(ConfigError) as err:
        validate(load(overrides=overrides))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_sampling_keys_are_listed_with_their_docs_and_the_flat_eval_keys_still_work():
    from marft_agents.training.config import describe

    keys = {key: doc for key, _, doc in describe()}
    for key in (
        "top_k",
        "top_p",
        "stop",
        "agents.<agent_id>.top_k",
        "agents.<agent_id>.top_p",
        "agents.<agent_id>.stop",
        "eval.temperature",
        "eval.top_k",
        "eval.top_p",
        "eval.seed",
        "eval_episodes",
        "eval_every",
    ):
        assert keys[key], key
    config = load(overrides=["eval_episodes=5", "eval.temperature=0.7", "eval_every=2"])
    assert (config.eval_episodes, config.eval.temperature, config.eval_every) == (5, 0.7, 2)


class Recorder:
    """Wraps ``policy.generate``: each call's adapter and sampling."""

    def __init__(self, policy, monkeypatch):
        self.calls, original = [], policy.generate
        monkeypatch.setattr(policy, "generate", lambda p, a, s, **kw: self.calls.append((a, s)) or original(p, a, s, **kw))

    def by_adapter(self):
        return {a: {s.top_k for x, s in self.calls if x == a} for a, _ in self.calls}


def test_each_agents_settings_reach_the_engine_in_process_and_on_a_worker(tiny_model_dir, policy, monkeypatch):
    from marft_agents.distributed.worker import RolloutWorker

    overrides = [f"env={CHAIN}", f"model={tiny_model_dir}", "max_new_tokens=6", "agents.reasoner_0.top_k=1", "agents.actor_0.top_k=7"]
    config = load(overrides=overrides)
    sampling, own = training_sampling(config)
    recorder = Recorder(policy, monkeypatch)
    rollout = RolloutEngine(policy, sampling, engine=HFEngine(policy), agent_sampling=own)
    episodes = rollout.collect([marft_envs.make(CHAIN) for _ in range(2)], range(2))
    assert recorder.by_adapter() == {"reasoner_0": {1}, "actor_0": {7}}
    greedy = policy.generate([episodes[0].steps[0].prompt], "reasoner_0", Sampling(0.0, 6)).responses[0]
    assert episodes[0].steps[0].response == greedy  # top_k=1: the reasoner's own, not the run's

    spec = worker_spec(config, record_state=False)
    assert (spec.top_k, spec.top_p, spec.stop, spec.agents["actor_0"].top_k) == (0, 1.0, (), 7)
    worker = RolloutWorker(spec)
    worker.engine, worker.version = worker._build_engine(), 0  # as load() makes it, without Ray's object store
    on_worker = Recorder(worker.policy, monkeypatch)
    worker.collect(0, [None], [0, 1], [10, 11])
    assert on_worker.by_adapter() == {"reasoner_0": {1}, "actor_0": {7}}


# -- evaluation's own sampling -----------------------------------------------------------------------------------------


def actions(result):
    return [[s["action"] for s in t["steps"]] for t in result["samples"]]


def test_default_evaluation_stays_greedy_and_a_sampled_one_depends_on_its_seed_alone(policy):
    args = dict(env_id=CHAIN, env_kwargs={}, n=6, max_new_tokens=8, samples=6)
    greedy = evaluate(policy, **args)
    assert greedy["decoding"] == "greedy" and actions(evaluate(policy, **args, sampling=EvalSampling())) == actions(greedy)
    state = torch.get_rng_state()
    first = evaluate(policy, **args, sampling=EvalSampling(temperature=1.0, seed=1))
    assert torch.equal(torch.get_rng_state(), state)  # a mid-run evaluation leaves the training's draws alone
    torch.manual_seed(123)  # whatever the global generator holds
    again = evaluate(policy, **args, sampling=EvalSampling(temperature=1.0, seed=1))
    other = evaluate(policy, **args, sampling=EvalSampling(temperature=1.0, seed=2))
    assert first["decoding"] == "sampled at T=1"
    assert actions(first) == actions(again) != actions(other)
    assert actions(first) != actions(greedy)
    truncated = evaluate(policy, **args, sampling=EvalSampling(temperature=1.0, top_k=1, seed=5))
    assert truncated["decoding"] == "sampled at T=1, top-k 1" and actions(truncated) == actions(greedy)


def test_a_workers_sampled_evaluation_draws_what_an_episode_seeded_engine_draws_in_process(tiny_model_dir):
    from marft_agents.distributed.worker import RolloutWorker

    config = load(overrides=[f"env={CHAIN}", f"model={tiny_model_dir}", "max_new_tokens=6"])
    worker = RolloutWorker(worker_spec(config, record_state=False))
    worker.engine, worker.version = worker._build_engine(), 0
    plan = eval_plan(CHAIN, {})
    options = episode_options(plan, marft_envs.make(CHAIN, **plan.env_kwargs), 4)
    sampling = EvalSampling(temperature=1.0, top_p=0.9, seed=3)
    run, own = eval_sampling(sampling, 6)
    played, _ = worker.collect(0, [None], [0, 1, 2, 3], [HELDOUT_SEED + i for i in range(4)], options, plan.env_kwargs, (run, own, 3))
    here = evaluate(worker.policy, CHAIN, {}, 4, max_new_tokens=6, sampling=sampling, engine=EpisodeSeededEngine(worker.policy), samples=4)
    assert [[s.text for s in e.steps] for e in played] == actions(here)


def test_marft_eval_takes_the_eval_section_and_says_how_it_drew(tiny_model_dir, capsys):
    from marft_agents.cli import main as cli

    argv = ["eval", "--model", str(tiny_model_dir), "--episodes", "2", "max_new_tokens=4", "threads=1"]
    assert cli([*argv, "eval.temperature=1.0", "eval.top_p=0.9", 'agents.actor_0.stop=["="]']) == 0
    assert "(sampled at T=1, top-p 0.9, single pass)" in capsys.readouterr().out
    assert cli(argv) == 0
    assert "(greedy, single pass)" in capsys.readouterr().out

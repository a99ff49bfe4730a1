"""Distributed rollouts: per-episode sampling, the worker pool's split, weights, faults and greedy evaluation.

The pool tests share one pool of two workers (embedded model, one thread each) on the session's
Ray cluster (``ray_cluster`` in tests/conftest.py); faults are injected with the workers' test hook
(``MARFT_RAY_TEST_FAULT``: a file that says ``die`` or ``hang``).
"""

from __future__ import annotations

import dataclasses
import os

import pytest
import torch

import marft_envs
from marft_agents.distributed import ClusterError, WorkerError
from marft_agents.distributed.config import DistributedConfig
from marft_agents.engines.seeded import EpisodeSeededEngine, episode_seed
from marft_agents.models.sampling import Request, Sampling
from marft_agents.rollout.episode import AgentStep, Episode, check_on_policy
from marft_agents.rollout.evaluation import evaluate
from marft_agents.training.config import ConfigError, TrainConfig, validate
from marft_agents.training.trainer import build_policy

ENV = "marft/MathChain-v0"


def same_episodes(a: list[Episode], b: list[Episode]) -> bool:
    """Bit for bit: indices, tokens, behaviour log-probs, texts, rewards, versions."""
    assert [e.index for e in a] == [e.index for e in b]
    for x, y in zip(a, b):
        assert x.solved == y.solved and len(x.steps) == len(y.steps)
        for s, t in zip(x.steps, y.steps):
            assert (s.agent, s.round, s.prompt, s.response, s.text, s.reward, s.version) == (
                t.agent,
                t.round,
                t.prompt,
                t.response,
                t.text,
                t.reward,
                t.version,
            )
            assert torch.equal(s.token_logps, t.token_logps)
    return True


# -- without Ray ---------------------------------------------------------------------------------------------


def test_split_cuts_contiguous_blocks_by_index():
    from marft_agents.distributed.pool import split

    assert split(list(range(7)), 3) == [[0, 1], [2, 3], [4, 5, 6]]
    assert split([4, 5], 3) == [[], [4], [5]]
    assert sum(split(list(range(64)), 5), []) == list(range(64))


def test_episode_seeds_differ_by_seed_update_and_index_and_are_stable():
    seeds = {episode_seed(s, u, i) for s in (0, 1) for u in (0, 1) for i in (0, 1, 2)}
    assert len(seeds) == 12
    assert episode_seed(3, 1, 5) == episode_seed(3, 1, 5) and 0 <= episode_seed(3, 1, 5) < 2**63


@pytest.fixture(scope="module")
def policy():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the workers: on a loaded 2-core machine more threads stall each other
    torch.manual_seed(0)
    yield build_policy(TrainConfig(), marft_envs.make(ENV).possible_agents)
    torch.set_num_threads(threads)


def test_an_episode_samples_the_same_whatever_else_is_in_its_batch(policy):
    env = marft_envs.make(ENV)
    prompts = {}
    for i in range(4):
        env.reset(seed=i)
        agent = env.ready_agents()[0]
        prompts[i] = policy.prompt(env.observe(agent))
    adapter = policy.adapter_of[agent]
    engine = EpisodeSeededEngine(policy)

    def play(indices):
        engine.seed_episodes({i: episode_seed(0, 0, i) for i in indices})
        gen = engine.generate([Request(prompts[i], adapter, episode=i) for i in indices], Sampling(1.0, 12))
        return {i: (gen.responses[k], gen.token_logps[k]) for k, i in enumerate(indices)}

    alone, among, reordered = play([3]), play([0, 1, 2, 3]), play([2, 3])
    assert alone[3][0] == among[3][0] == reordered[3][0]
    torch.testing.assert_close(alone[3][1], among[3][1], rtol=0, atol=1e-5)  # batch numerics only
    assert len({tuple(among[i][0]) for i in among}) > 1  # the episodes do draw differently
    # behaviour log-probs are those of softmax(logits / T) at the sampled tokens
    logp, _, mask = policy.score([prompts[3]], [among[3][0]], adapter, 1.0)
    torch.testing.assert_close(logp[0, mask[0]], among[3][1], rtol=0, atol=1e-5)


def test_steps_of_another_version_are_refused():
    step = AgentStep(episode=0, round=0, agent="a", prompt=[1], response=[2], token_logps=torch.zeros(1), text="", version=2)
    check_on_policy([Episode(0, [step], None)], 2)
    with pytest.raises(RuntimeError, match="other adapter weights than version 3"):
        check_on_policy([Episode(0, [step], None)], 3)


def test_the_trainer_refuses_steps_of_an_older_version(tiny_model_dir, tmp_path, monkeypatch):
    from marft_agents.rollout.layered import RolloutEngine
    from marft_agents.training.trainer import train

    collect = RolloutEngine.collect

    def stale_collect(self, *args, **kwargs):
        episodes = collect(self, *args, **kwargs)
        if kwargs.get("seed_of") and self.sampling.temperature > 0:  # training episodes, not evaluation
            episodes[-1].steps[0].version -= 1
        return episodes

    monkeypatch.setattr(RolloutEngine, "collect", stale_collect)
    config = TrainConfig(
        model=str(tiny_model_dir),
        run_dir=str(tmp_path / "run"),
        updates=1,
        episodes_per_update=2,
        eval_episodes=1,
        eval_rounds=0,
        max_new_tokens=4,
    )
    with pytest.raises(RuntimeError, match="refusing to train on them"):
        train(config, progress=False, quiet=True)
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_the_scaling_out_page_is_linked():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    assert "(docs/scaling-out.md)" in (root / "README.md").read_text()
    assert "(scaling-out.md)" in (root / "docs" / "index.md").read_text()


@pytest.mark.parametrize(
    "override, message",
    [
        ({"workers": -1}, "distributed.workers must be >= 0"),
        ({"cpus_per_worker": 0.0}, "distributed.cpus_per_worker must be > 0"),
        ({"timeout_s": 0.0}, "distributed.timeout_s must be > 0"),
        ({"max_restarts": -2}, "distributed.max_restarts must be >= 0"),
        ({"address": "headnode"}, "must be host:port"),
        ({"temp_dir": "/tmp/" + "x" * 60}, "Ray's socket paths"),
        ({"overlap": True}, "distributed.overlap=true plays the next batch on rollout workers"),
        ({"overlap": True, "workers": 1}, "set generation.tis_cap"),
    ],
)
def test_bad_distributed_settings_are_refused_in_one_line(override, message):
    config = TrainConfig()
    config.distributed = dataclasses.replace(DistributedConfig(), **override)
    with pytest.raises(ConfigError, match=message) as err:
        validate(config)
    assert "\n" not in str(err.value)


def test_an_address_nothing_listens_at_fails_in_seconds():
    pytest.importorskip("ray")
    from marft_agents.distributed.cluster import _check_reachable

    with pytest.raises(ClusterError, match="no Ray cluster at distributed.address=127.0.0.1:1"):
        _check_reachable("127.0.0.1:1")


# -- one pool of two workers ----------------------------------------------------------------------------------

SETTINGS = DistributedConfig(workers=2, timeout_s=120.0, max_restarts=8)


@pytest.fixture(scope="module")
def pool(ray_cluster, policy, tmp_path_factory):
    import ray

    from marft_agents.distributed.cluster import connect
    from marft_agents.distributed.pool import WorkerPool
    from marft_agents.training.setup import worker_spec

    if not ray.is_initialized():
        connect(DistributedConfig(address=ray_cluster))  # as a run joins it: on loopback
    fault = tmp_path_factory.mktemp("fault") / "fault"
    os.environ["MARFT_RAY_TEST_FAULT"] = str(fault)  # the workers get it when they start
    config = TrainConfig(max_new_tokens=16, temperature=1.0)
    config.distributed = SETTINGS
    try:
        pool = WorkerPool(worker_spec(config, record_state=False), SETTINGS, policy, version=0)
    finally:
        del os.environ["MARFT_RAY_TEST_FAULT"]
    pool.fault = fault
    yield pool
    pool.close()


@pytest.fixture(scope="module")
def baseline(pool):
    """Episodes 0-7 of version 0, played by the two workers without a fault."""
    return pool.collect(None, range(8), seed_of=lambda i: 100 + i)


def test_a_batch_played_again_is_identical_and_carries_the_published_version(pool, baseline):
    assert [e.index for e in baseline] == list(range(8))
    assert {s.version for e in baseline for s in e.steps} == {0}
    assert same_episodes(pool.collect(None, range(8), seed_of=lambda i: 100 + i), baseline)


def test_which_worker_plays_a_block_does_not_change_it(pool, baseline):
    import ray

    block = [0, 1, 2, 3]  # worker 0's block; worker 1 plays it here
    episodes, _ = ray.get(pool.workers[1].collect.remote(0, [pool._weights], block, [100 + i for i in block]))
    assert same_episodes(episodes, baseline[:4])


def test_a_worker_killed_mid_collection_is_restarted_and_its_episodes_played_again(pool, baseline):
    before, failures = pool.pids(), sum(pool.failures)
    pool.fault.write_text("die")
    again = pool.collect(None, range(8), seed_of=lambda i: 100 + i)
    assert not pool.fault.exists() and sum(pool.failures) == failures + 1  # the fault happened, once
    assert len(set(pool.pids()) - set(before)) == 1  # one worker is a new process
    assert same_episodes(again, baseline)


@pytest.mark.slow  # waits out a timeout (~30 s); the killed-worker test keeps the restart path in the default suite
def test_a_worker_that_hangs_past_the_timeout_is_killed_and_its_episodes_played_again(pool, baseline):
    failures = sum(pool.failures)
    pool.fault.write_text("hang")
    pool.settings = dataclasses.replace(SETTINGS, timeout_s=5.0)
    try:
        again = pool.collect(None, range(8), seed_of=lambda i: 100 + i)
    finally:
        pool.settings = SETTINGS
    assert not pool.fault.exists() and sum(pool.failures) >= failures + 1
    assert same_episodes(again, baseline)


def test_failures_past_max_restarts_stop_the_batch_with_one_line(pool):
    pool.fault.write_text("die")
    pool.settings = dataclasses.replace(SETTINGS, max_restarts=min(pool.failures))
    try:
        with pytest.raises(WorkerError, match="max_restarts") as err:
            pool.collect(None, range(8), seed_of=lambda i: 100 + i)
    finally:
        pool.settings = SETTINGS
    assert "\n" not in str(err.value) and "not trained on" in str(err.value)


def test_a_batch_started_before_a_publish_keeps_its_weights_even_when_played_again(pool, policy, baseline):
    """distributed.overlap: the next batch plays under the old version while the trainer publishes a new one."""
    saved = {a: policy.adapter_state(a) for a in policy.adapters}
    failures = sum(pool.failures)
    pool.fault.write_text("die")  # one worker dies mid-batch: its block is played again after the publish
    pending = pool.start_collect(None, range(8), seed_of=lambda i: 100 + i)
    try:
        with torch.no_grad():
            for a in policy.adapters:
                for p in policy.parameters(a):
                    p.add_(0.05 * torch.randn_like(p))
        pool.sync(1, wait=False)
        assert pending.version == 0
        assert same_episodes(pending.result(), baseline)  # version 0's episodes, bit for bit
        assert not pool.fault.exists() and sum(pool.failures) >= failures + 1  # it died, and its block was played again
        assert {s.version for e in pool.collect(None, range(2)) for s in e.steps} == {1}  # the next batch: the new weights
    finally:
        for a, state in saved.items():
            policy.load_adapter_state(a, state)
        pool.sync(0)


def test_greedy_evaluation_through_workers_equals_in_process_before_and_after_a_publish(pool, policy):
    args = dict(env_id=ENV, env_kwargs={}, n=6, max_new_tokens=16)
    assert pool.evaluate(policy, **args, samples=2) == evaluate(policy, **args, samples=2)
    played = pool.evaluate(policy, **args, outcomes=True)  # each problem's outcome too (issue 53)
    assert played == evaluate(policy, **args, outcomes=True) and len(played["outcomes"]) == 6
    saved = {a: policy.adapter_state(a) for a in policy.adapters}
    try:
        with torch.no_grad():  # new weights, as an update would leave them
            for a in policy.adapters:
                for p in policy.parameters(a):
                    p.add_(0.05 * torch.randn_like(p))
        pool.sync(1)
        ours = evaluate(policy, **args)
        assert pool.evaluate(policy, **args) == ours
        assert {s.version for e in pool.collect(None, range(2)) for s in e.steps} == {1}
    finally:
        for a, state in saved.items():
            policy.load_adapter_state(a, state)
        pool.sync(0)


def test_the_session_clusters_workers_run_at_the_tests_priority(ray_connected):
    # Ray's default nice 15 starved the workers beside busy processes (tests/conftest.py)
    import ray

    @ray.remote(num_cpus=0)  # the module's rollout workers hold the cluster's CPUs
    def niceness() -> int:
        return os.nice(0)

    assert ray.get(niceness.remote()) == os.nice(0)

"""``device``: its values and one-line errors, and the CPU proof that training places every tensor it makes.

The trap (``device_trap.DeviceTrap``) raises at any line of ``marft_agents`` that makes a tensor without
``device=``; every learner collects, scores and updates under it here, with the model on the CPU.
The tests marked ``device`` run on a GPU only (``benchmarks/gpu_check.py`` runs them) and skip elsewhere.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from agent_helpers import plant_rewards
from device_trap import DeviceTrap, ImplicitDevice

import marft_envs
from marft_agents import algorithms
from marft_agents.algorithms.tis import recompute_behaviour
from marft_agents.cli import main as cli
from marft_agents.models.device import resolve_device
from marft_agents.models.policy import LaMASPolicy, load_base
from marft_agents.models.sampling import Sampling
from marft_agents.rollout.layered import RolloutEngine
from marft_agents.training.config import ConfigError, TrainConfig, load, validate
from marft_agents.training.setup import build_policy

# -- the trap catches what it must --------------------------------------------------------------------


def test_the_trap_raises_on_a_tensor_made_without_a_device():
    with DeviceTrap(watch=("marft_agents", __name__)):
        with pytest.raises(ImplicitDevice, match=r"torch\.zeros without device="):
            torch.zeros(3)
        with pytest.raises(ImplicitDevice, match=r"torch\.tensor without device="):
            torch.tensor([1.0, 2.0])
        with pytest.raises(ImplicitDevice, match=r"torch\.arange"):
            torch.arange(4, device=None)  # None is torch's default device: as implicit as no argument
        torch.zeros(3, device="cpu")  # said where: passes
        torch.as_tensor(torch.ones(2, device="cpu"))  # a copy keeps its source's device: passes


def test_the_trap_watches_marft_agents_code_and_not_libraries():
    # A line of a module named marft_agents.* that forgets device= raises; torch's own nn.Linear does not.
    package_line = compile("torch.ones(2, 2)", "marft_agents/algorithms/imagined.py", "exec")
    with DeviceTrap():
        with pytest.raises(ImplicitDevice, match=r"marft_agents\.algorithms\.imagined:1 calls torch\.ones"):
            exec(package_line, {"torch": torch, "__name__": "marft_agents.algorithms.imagined"})
        torch.nn.Linear(2, 3)  # torch makes its weights with device=None: not ours to place
        torch.zeros(3)  # this test module is not watched by default


# -- every learner, collected and updated under the trap ---------------------------------------------

RUNS = {
    "marft": ("marft/MathChain-v0", {"kl_coef": 0.1, "sequential": {"enabled": True}}),
    "marft_token": ("marft/MathChain-v0", {"kl_coef": 0.1}),
    "grpo": ("marft/MathChain-v0", {"group_size": 2, "kl_coef": 0.1}),
    "ppo": ("marft/MathSolo-v0", {"kl_coef": 0.1}),
    "ippo": ("marft/MathDebate-v0", {}),
    "mappo": ("marft/MathDebate-v0", {}),
    "cory": ("marft/MathCORY-v0", {}),
}


def build(model_dir, name: str, tis_cap: float | None = None):
    env_id, options = RUNS[name]
    kwargs = {"n_agents": 2, "rounds": 1} if "Debate" in env_id else {}
    envs = [marft_envs.make(env_id, **kwargs) for _ in range(4)]
    model, tokenizer = load_base(str(model_dir))
    policy = LaMASPolicy(model, tokenizer, envs[0].possible_agents)
    config_class, learner_class = algorithms.lookup(name)
    config = config_class(minibatch_size=2)
    for key, value in options.items():
        if isinstance(value, dict):
            for k, v in value.items():
                setattr(getattr(config, key), k, v)
        else:
            setattr(config, key, value)
    algo = learner_class(policy, config, temperature=1.0, tis_cap=tis_cap)
    engine = RolloutEngine(policy, Sampling(1.0, 6), record_state=algo.needs_state, skip_ignored=algo.skips_ignored)
    return policy, algo, engine, envs


@pytest.mark.parametrize("name", list(RUNS))
def test_an_update_makes_no_tensor_without_a_device(tiny_model_dir, name):
    policy, algo, engine, envs = build(tiny_model_dir, name, tis_cap=2.0 if name in ("marft", "grpo") else None)
    torch.manual_seed(0)
    before = [p.detach().clone() for a in policy.adapters for p in policy.parameters(a)]
    with DeviceTrap():  # collection (generation, log-probs), the TIS recompute, scoring, the update, the critic
        algo.before_collect(envs, 0)
        group = algo.group_size
        episodes = plant_rewards(engine.collect(envs, range(4), seed_of=lambda i: i // group))
        steps = [s for e in episodes for s in e.steps]
        if algo.tis_cap is not None:
            recompute_behaviour(policy, steps, 1.0)
        metrics = algo.update(episodes, 0, np.random.default_rng(0))
    assert all(np.isfinite(v) for v in metrics.values()), metrics
    after = [p for a in policy.adapters for p in policy.parameters(a)]
    assert any(not torch.equal(b, a) for b, a in zip(before, after)), "the update took no step: the trap saw no update"


# -- the setting ---------------------------------------------------------------------------------------


def test_device_values_resolve_and_a_missing_device_is_one_line():
    assert resolve_device("cpu", cuda_available=True) == torch.device("cpu")
    assert resolve_device("auto", cuda_available=False) == torch.device("cpu")
    assert resolve_device("auto", cuda_available=True) == torch.device("cuda")
    assert resolve_device("cuda:1", cuda_available=True, cuda_count=2) == torch.device("cuda", 1)
    with pytest.raises(ValueError, match=r"^device=cuda: torch sees no CUDA device on this machine .*use device=cpu or device=auto$"):
        resolve_device("cuda", cuda_available=False)
    with pytest.raises(ValueError, match=r"^device=cuda:2: this machine has 2 CUDA device\(s\), cuda:0 to cuda:1; use one of them$"):
        resolve_device("cuda:2", cuda_available=True, cuda_count=2)
    with pytest.raises(ValueError, match=r"device must be"):
        resolve_device("gpu")


@pytest.mark.parametrize("value", ["gpu", "cuda:", "cuda:x", "CPU", "cuda:0 ", "mps"])
def test_a_misspelt_device_is_refused_by_the_config(value):
    config = load(overrides=[f"device={value}"])
    with pytest.raises(ConfigError, match=r'^device must be "auto", "cpu", "cuda" or "cuda:N", got'):
        validate(config)


def test_device_cuda_without_one_is_one_line_before_any_model_loads(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)

    def no_loading(*args, **kwargs):
        raise AssertionError("the model was loaded before the device was checked")

    monkeypatch.setattr("marft_agents.training.setup.load_base", no_loading)
    run_dir = tmp_path / "run"
    code = cli(["train", "device=cuda", "updates=1", f"run_dir={run_dir}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert "device=cuda: torch sees no CUDA device" in err[0]
    assert not run_dir.exists()


def test_device_cpu_puts_the_policy_and_the_critic_on_the_cpu(tiny_model_dir):
    config = TrainConfig(model=str(tiny_model_dir), device="cpu")
    policy = build_policy(config, ["reasoner_0", "actor_0"])
    assert policy.device == torch.device("cpu")
    assert {p.device.type for p in policy.base.parameters()} == {"cpu"}


# -- on a GPU (benchmarks/gpu_check.py runs these; skipped without one) -------------------------------

gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.mark.device
@gpu
@pytest.mark.parametrize("name", list(RUNS))
def test_on_a_gpu_every_learner_collects_and_updates(tiny_model_dir, name):
    policy, algo, engine, envs = build(tiny_model_dir, name, tis_cap=2.0 if name == "marft" else None)
    policy.to("cuda")
    for critic in [getattr(algo, "critic", None), *getattr(algo, "critics", {}).values()]:
        if critic is not None:
            critic.to("cuda")
    torch.manual_seed(0)
    algo.before_collect(envs, 0)
    episodes = plant_rewards(engine.collect(envs, range(4), seed_of=lambda i: i // algo.group_size))
    assert {s.token_logps.device.type for e in episodes for s in e.steps if not s.skipped} == {"cuda"}
    if algo.tis_cap is not None:
        recompute_behaviour(policy, [s for e in episodes for s in e.steps], 1.0)
    metrics = algo.update(episodes, 0, np.random.default_rng(0))
    assert all(np.isfinite(v) for v in metrics.values()), metrics
    assert {p.device.type for a in policy.adapters for p in policy.parameters(a)} == {"cuda"}


@pytest.mark.device
@gpu
def test_on_a_gpu_a_run_trains_checkpoints_on_cpu_and_resumes(tiny_model_dir, tmp_path):
    from marft_agents.runs import checkpoint as ckpt
    from marft_agents.training.trainer import train

    common = [f"model={tiny_model_dir}", "device=cuda", "episodes_per_update=4", "eval_episodes=2", "eval_rounds=0", "max_new_tokens=6"]
    run_dir = tmp_path / "run"
    train(load(overrides=[*common, "updates=1", "checkpoint_every=1", f"run_dir={run_dir}"]), progress=False, quiet=True)
    state = torch.load(ckpt.latest_checkpoint(run_dir / "checkpoints"), weights_only=True)  # no map_location: as saved
    devices = {t.device.type for t in _tensors(state["algo"])}
    assert devices == {"cpu"}, devices
    summary = train(
        load(overrides=[*common, "updates=2", "checkpoint_every=1", f"run_dir={run_dir}"]), resume=True, progress=False, quiet=True
    )
    assert summary["updates"] == 2


def _tensors(tree):
    if isinstance(tree, torch.Tensor):
        yield tree
    elif isinstance(tree, dict):
        for v in tree.values():
            yield from _tensors(v)
    elif isinstance(tree, (list, tuple)):
        for v in tree:
            yield from _tensors(v)


# -- gradient_checkpointing -----------------------------------------------------------------------------


def score_and_backward(model_dir, checkpointing: bool):
    """Log-probs of a batch under actor_0, the adapter's gradients, and layer 0's MLP runs in the forward and the backward pass."""
    envs = [marft_envs.make("marft/MathChain-v0") for _ in range(4)]
    torch.manual_seed(0)
    policy = build_policy(TrainConfig(model=str(model_dir), gradient_checkpointing=checkpointing), envs[0].possible_agents)
    steps = [s for e in RolloutEngine(policy, Sampling(1.0, 8)).collect(envs, range(4)) for s in e.steps if s.agent == "actor_0"]
    mlp = next(m for n, m in policy.base.named_modules() if n.endswith("layers.0.mlp"))
    runs, forward = [], mlp.forward
    mlp.forward = lambda *a, **k: (runs.append(1), forward(*a, **k))[1]  # a recompute skips module hooks: count the calls
    logp, entropy, mask = policy.score([s.prompt for s in steps], [s.response for s in steps], "actor_0", 1.0)
    in_forward = len(runs)
    ((logp + entropy) * mask).sum().backward()
    return logp.detach(), [p.grad for p in policy.parameters("actor_0")], (in_forward, len(runs) - in_forward)


def test_gradient_checkpointing_recomputes_the_layers_and_changes_no_number(tiny_model_dir):
    logp, grads, runs = score_and_backward(tiny_model_dir, False)
    logp_gc, grads_gc, runs_gc = score_and_backward(tiny_model_dir, True)
    assert runs == (2, 0)  # the shared prompt prefix, then the batch on its cache
    assert runs_gc == (1, 1)  # checkpointed layers take no cache: the batch with its prefix, and again in the backward pass
    assert torch.equal(logp, logp_gc)
    assert all(torch.allclose(a, b, rtol=1e-5, atol=1e-7) for a, b in zip(grads, grads_gc))


# -- checkpoints: CPU tensors, and a GPU run's RNG states ---------------------------------------------


def test_a_checkpoint_is_written_from_cpu_tensors_that_stay_the_same_objects():
    from marft_agents.runs.checkpoint import on_cpu

    t = torch.arange(3, device="cpu")
    state = {"a": [t, (t, 1)], "b": {"c": t}, "rng": (3, (1, 2), None)}
    moved = on_cpu(state)
    assert moved == state and moved["a"][0] is t and moved["a"][1][0] is t and moved["b"]["c"] is t  # a CPU run saves what it did


def test_a_checkpoint_whose_cuda_rng_state_is_not_uint8_tensors_is_refused(tmp_path):
    from marft_agents.runs import checkpoint as ckpt

    good = ckpt.rng_state(np.random.default_rng(0))
    base = {"update": 1, "algo": {"adapters": {}}}
    assert (
        ckpt.check_resume_state({**base, "rng": {**good, "cuda": [torch.zeros(8, dtype=torch.uint8)]}}, tmp_path / "x.pt", updates=2) == 1
    )
    with pytest.raises(ckpt.CheckpointError, match="its cuda RNG state cannot be restored"):
        ckpt.check_resume_state({**base, "rng": {**good, "cuda": ["not a state"]}}, tmp_path / "x.pt", updates=2)

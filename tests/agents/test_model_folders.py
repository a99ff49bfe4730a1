"""Model folders that are broken or hostile: one line each, no code run, no traceback (issue 51, case 1).

Each case copies the tiny random model's folder and breaks one file: a truncated safetensors file,
weights only as a pickle (one that would leave a marker file if it were ever unpickled), a chat
template that raises, reaches for a forbidden attribute, does not parse or runs past the time limit.
Every one is refused by ``load_base`` with a :class:`ModelFolderError` (a ValueError) and by
``marft train model=FOLDER`` with exit status 2, one stderr line and no run folder.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import torch

from marft_agents.cli import main as cli
from marft_agents.models import named
from marft_agents.models.named import ModelFolderError, safetensors_problem
from marft_agents.models.policy import load_base

MARKER = "unpickled-marker"


class _Hostile:
    """Unpickling this creates a file: proof that a pickle was (or was not) loaded."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return (os.makedirs, (self.path,))


def _truncate(folder: Path) -> None:
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-1000])


def _header_only(folder: Path) -> None:
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:20])


def _pickle_only(folder: Path) -> None:
    (folder / "model.safetensors").unlink()
    torch.save({"marker": _Hostile(str(folder / MARKER))}, folder / "pytorch_model.bin")


def _plain_pickle_only(folder: Path) -> None:
    from safetensors.torch import load_file

    state = load_file(str(folder / "model.safetensors"))
    (folder / "model.safetensors").unlink()
    torch.save(state, folder / "pytorch_model.bin")  # a real state dict: loadable, and still refused


def _template(text: str):
    def write(folder: Path) -> None:
        (folder / "chat_template.jinja").write_text(text)

    return write


def _tokenizer_json_cut(folder: Path) -> None:
    path = folder / "tokenizer.json"
    path.write_text(path.read_text()[:500])


CASES = {
    "truncated-safetensors": (_truncate, "model.safetensors is truncated or damaged"),
    "safetensors-header-only": (_header_only, "model.safetensors is truncated or damaged"),
    "hostile-pickle": (_pickle_only, "holds its weights only as pickles (pytorch_model.bin)"),
    "state-dict-pickle": (_plain_pickle_only, "loading a pickle can run code"),
    "template-raises": (_template("{{ raise_exception('no system role') }}"), "TemplateError: no system role"),
    "template-attribute": (
        _template("{{ messages.__class__.__mro__[1].__subclasses__() }}"),
        "SecurityError: access to attribute '__class__'",
    ),
    "template-syntax": (_template("{% for m in %}"), "TemplateSyntaxError"),
    "template-undefined": (_template("{{ nothing.here }}"), "UndefinedError"),
    "tokenizer-json-cut": (_tokenizer_json_cut, "JSONDecodeError"),
}


@pytest.fixture
def broken(tiny_model_dir, tmp_path):
    def make(case: str) -> Path:
        folder = tmp_path / case
        shutil.copytree(tiny_model_dir, folder)
        if case.startswith("template") and not (folder / "chat_template.jinja").exists():
            pytest.fail("the tiny model writes its template to chat_template.jinja")
        CASES[case][0](folder)
        return folder

    return make


@pytest.mark.parametrize("case", list(CASES))
def test_load_base_refuses_with_one_line(case, broken):
    folder = broken(case)
    with pytest.raises(ModelFolderError) as info:
        load_base(str(folder))
    message = str(info.value)
    assert CASES[case][1] in message, message
    assert "\n" not in message
    if case.startswith("template"):
        assert str(folder / "chat_template.jinja") in message  # names the file to fix
    else:
        assert str(folder) in message
    assert not (folder / MARKER).exists(), "the pickle was loaded"


@pytest.mark.parametrize("case", ["truncated-safetensors", "hostile-pickle", "template-attribute"])
def test_marft_train_refuses_with_one_line(case, broken, tmp_path, capsys):
    folder = broken(case)
    run = tmp_path / "run"
    argv = ["train", "--no-progress", f"model={folder}", f"run_dir={run}", "updates=1", "threads=1"]
    assert cli(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("marft train: error: ") and CASES[case][1] in err, err
    assert "\n" not in err and "Traceback" not in err
    assert not run.exists()
    assert not (folder / MARKER).exists()


def test_a_pickle_beside_safetensors_is_never_read(tiny_model_dir, tmp_path):
    folder = tmp_path / "both"
    shutil.copytree(tiny_model_dir, folder)
    torch.save({"marker": _Hostile(str(folder / MARKER))}, folder / "pytorch_model.bin")
    load_base(str(folder))  # the safetensors weights load; the pickle is left alone
    assert not (folder / MARKER).exists()


def test_a_slow_template_is_cut_off(broken, monkeypatch):
    monkeypatch.setattr(named, "RENDER_SECONDS", 0.5)
    folder = broken("template-raises")
    nested = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    (folder / "chat_template.jinja").write_text(nested)
    with pytest.raises(ModelFolderError, match="TimeoutError: it took over 0.5 s"):
        load_base(str(folder))


def test_a_huge_rendering_is_refused(broken):
    folder = broken("template-raises")
    (folder / "chat_template.jinja").write_text("{{ 'x' * 2000000 }}")
    with pytest.raises(ModelFolderError, match="into 2000000 characters"):
        load_base(str(folder))


def test_the_header_check_accepts_whole_files_and_names_what_is_wrong(tiny_model_dir, tmp_path):
    whole = tiny_model_dir / "model.safetensors"
    assert safetensors_problem(whole) is None
    data = whole.read_bytes()
    for cut, why in [(b"", "shorter than a header"), (data[:8], "header in a"), (data + b"\0", "cover")]:
        path = tmp_path / "w.safetensors"
        path.write_bytes(cut)
        assert why in safetensors_problem(path)
    path.write_bytes((7).to_bytes(8, "little") + b"not json")
    assert safetensors_problem(path) == "its header is not JSON"

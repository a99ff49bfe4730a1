"""Writing a run's files: inside the run folder, never through a symbolic link, never half-written.

Every file ``marft train`` writes (config, metrics, evaluations, transcripts, the plot, checkpoints)
goes through this module. A path below the run folder is opened one folder at a time with
``O_NOFOLLOW``, so a link planted at a run file's name, or at a folder's name on the way to it, is
refused in one line (:class:`LinkError`) instead of followed to a file outside the folder. Whole
files are written to a temporary file in the same folder and renamed into place (``os.replace``: a
reader, or a kill at any moment, sees the old file or the new one, never half of one); metrics lines
are appended to a file opened ``O_APPEND | O_NOFOLLOW``. The run folder itself may be a link: where
runs live is the user's choice, what lies inside is the run's. A failed write (a full disk, a
read-only folder) is one line naming the file and, for a full disk, the disk (:class:`RunWriteError`).
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC
FULL_DISK = (errno.ENOSPC, errno.EDQUOT)
"""errno values that mean "no room left" (the disk, or the user's quota on it)."""


class LinkError(ValueError):
    """A symbolic link where a run writes a file or a folder."""


class RunWriteError(OSError):
    """A run file that could not be written (a full disk, a read-only folder), said in one line.

    ``str()`` is the line itself; ``errno`` the system's code (ENOSPC for a full disk).
    """

    def __init__(self, message: str, code: int | None = None):
        super().__init__(message)
        self.errno = code


def link_message(path: Path) -> str:
    """The one line that refuses a link at ``path``."""
    try:
        target = f" (to {os.readlink(path)})"
    except OSError:
        target = ""
    return (
        f"{path} is a symbolic link{target}: a run writes only real files inside its own folder; remove the link (or pick another run_dir)"
    )


def refuse_link(path: Path) -> None:
    """Raise :class:`LinkError` when ``path`` is a symbolic link (dangling or not)."""
    if os.path.islink(path):
        raise LinkError(link_message(path))


@contextmanager
def folder(root: str | Path, rel: str | Path = "", *, create: bool = True) -> Iterator[int]:
    """A file descriptor of the folder ``root/rel``, each part of ``rel`` opened without following a link.

    ``create``: make missing folders on the way. Raises :class:`LinkError` for a link at any part.
    """
    root = Path(root)
    parts = Path(rel).parts
    fd = os.open(root, _FOLDER)
    try:
        for i, part in enumerate(parts):
            if create:
                try:
                    os.mkdir(part, dir_fd=fd)
                except FileExistsError:  # a folder (fine), a file or a link (refused just below)
                    pass
            try:
                sub = os.open(part, _FOLDER | os.O_NOFOLLOW, dir_fd=fd)
            except OSError:
                here = root.joinpath(*parts[: i + 1])
                if os.path.islink(here):
                    raise LinkError(link_message(here)) from None
                raise
            os.close(fd)
            fd = sub
        yield fd
    finally:
        os.close(fd)


def ensure_folder(root: str | Path, rel: str | Path) -> Path:
    """Create ``root/rel`` (no part of it a link) and return its path."""
    with folder(root, rel):
        pass
    return Path(root, rel)


def write_file(root: str | Path, rel: str | Path, content: bytes | Callable[[BinaryIO], None]) -> Path:
    """Write ``root/rel`` whole (bytes, or a function writing to a binary file) by temp file and rename."""
    root, rel = Path(root), Path(rel)
    path = root / rel
    try:
        with folder(root, rel.parent) as fd:
            _refuse_link_at(fd, rel.name, path)
            tmp = f".{rel.name}.{secrets.token_hex(4)}.tmp"  # ".*.tmp": what checkpoint.remove_partial_files clears
            out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC, 0o666, dir_fd=fd)
            try:
                with os.fdopen(out, "wb") as f:
                    f.write(content) if isinstance(content, bytes) else content(f)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, rel.name, src_dir_fd=fd, dst_dir_fd=fd)
            except BaseException:
                try:
                    os.unlink(tmp, dir_fd=fd)
                except FileNotFoundError:
                    pass
                raise
            os.fsync(fd)  # the rename itself survives a crash
    except OSError as err:
        raise write_error(path, err) from None
    return path


def write_text(root: str | Path, rel: str | Path, text: str) -> Path:
    """:func:`write_file` for text (UTF-8)."""
    return write_file(root, rel, text.encode())


def append_text(root: str | Path, rel: str | Path, text: str) -> Path:
    """Append ``text`` to ``root/rel`` (created if missing), opened ``O_APPEND | O_NOFOLLOW``."""
    root, rel = Path(root), Path(rel)
    path = root / rel
    try:
        with folder(root, rel.parent) as fd:
            try:
                out = os.open(rel.name, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | _CLOEXEC, 0o666, dir_fd=fd)
            except OSError:
                _refuse_link_at(fd, rel.name, path)
                raise
            with os.fdopen(out, "ab") as f:
                f.write(text.encode())
    except OSError as err:
        raise write_error(path, err) from None
    return path


def write_error(path: Path, err: BaseException) -> RunWriteError:
    """One line for a failed write of ``path``: the full disk named, or the system's reason."""
    cause = os_error_in(err)
    if cause is not None and cause.errno in FULL_DISK:
        reason = f"the disk holding {path.parent} is full ({cause.strerror}; {free_space(path.parent)} free now)"
    elif cause is not None:
        reason = cause.strerror or str(cause)
    else:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        reason = f"{first[:160]}; {free_space(path.parent)} free on the disk holding {path.parent}"
    return RunWriteError(f"cannot write {path}: {reason}", cause.errno if cause is not None else None)


def os_error_in(err: BaseException | None) -> OSError | None:
    """The first OSError with an errno in ``err`` and its causes (torch wraps a failed write in a RuntimeError)."""
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, OSError) and err.errno is not None:
            return err
        err = err.__cause__ or err.__context__
    return None


def free_space(path: Path) -> str:
    """Free space on the disk holding ``path``, for people (``0 B``, ``12.3 MB``)."""
    try:
        free = shutil.disk_usage(path).free
    except OSError:
        return "unknown space"
    for unit in ("B", "kB", "MB"):
        if free < 1000:
            return f"{free:.0f} {unit}" if unit == "B" else f"{free:.1f} {unit}"
        free /= 1000
    return f"{free:.1f} GB"


def _refuse_link_at(fd: int, name: str, path: Path) -> None:
    try:
        mode = os.lstat(name, dir_fd=fd).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISLNK(mode):
        raise LinkError(link_message(path))

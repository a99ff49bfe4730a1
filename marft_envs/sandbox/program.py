"""The program's own process in a sandbox run: its resource limits, its files, and running it as ``__main__``.

Standard library only: the sandbox worker loads this file by path.
"""

from __future__ import annotations

import base64
import builtins
import os
import resource
import sys
import tempfile
import time
import traceback
import types


def host_workdir(plan: dict) -> str:
    """A fresh working directory for the run on the host, owned by the run's uid when it has one."""
    path = tempfile.mkdtemp(prefix="marft-sandbox-")
    if plan.get("uid") is not None:
        os.chown(path, plan["uid"], plan["gid"])
    return path


def cpu_exhausted(limits: dict, started: float) -> bool:
    """Whether a run killed by SIGKILL can have hit its hard CPU limit (only one that lasted that long can)."""
    return time.monotonic() - started >= limits["cpu_s"] * 0.9


def set_limits(limits: dict, plan: dict) -> None:
    mb = 1 << 20
    cpu = int(limits["cpu_s"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))  # soft: SIGXCPU; hard: SIGKILL a second later
    resource.setrlimit(resource.RLIMIT_AS, (limits["memory_mb"] * mb,) * 2)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits["max_file_mb"] * mb,) * 2)
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits["max_open_files"],) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crash must not write a core file to disk
    if plan["nproc"] is not None:
        resource.setrlimit(resource.RLIMIT_NPROC, (plan["nproc"],) * 2)


def write_files(workdir: str, files: dict) -> None:
    for name, content in files.items():
        path = os.path.join(workdir, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        data = base64.b64decode(content["b64"]) if "b64" in content else content["text"].encode()
        with open(path, "wb") as f:
            f.write(data)


def run_program(source: str, workdir: str, base_sys_path: list[str]) -> int:
    """Run ``source`` as ``__main__`` the way ``python main.py`` would; returns the exit code.

    ``base_sys_path`` is the standard library's directories (the worker's ``BASE_SYS_PATH``).
    """
    sys.argv = ["main.py"]
    sys.path = [workdir, *base_sys_path]  # never site-packages: a run gets the standard library only
    module = types.ModuleType("__main__")
    module.__file__ = os.path.join(workdir, "main.py")
    module.__builtins__ = builtins
    sys.modules["__main__"] = module
    code = 0
    try:
        exec(compile(source, module.__file__, "exec"), module.__dict__)
    except SystemExit as stop:
        code = _exit_code(stop.code)
    except BaseException as err:  # an uncaught error prints its traceback and exits 1, as python does
        tb = err.__traceback__
        traceback.print_exception(type(err), err, tb.tb_next if tb else None)  # without this frame
        code = 1
    try:
        import atexit

        atexit._run_exitfuncs()
    except BaseException:
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    return code


def _exit_code(code) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1

"""The code-repair judge: a program's tests run in a process that never loads the program.

This file is the ``main.py`` of one sandbox run (``marft_envs.sandbox``), standard library only;
:class:`marft_envs.tasks.code.harness.TestRunner` sends it with its siblings (``judge_proxy.py``,
``judge_program.py``, ``judge_wire.py``) and the tests as the run's *sealed input* (its stdin: see
``run_python``). A patch under test (``untrusted="program"``) comes as ``candidate.py``; the run
holds two processes::

    judge (J)       forks P first, only then reads the tests from stdin, so nothing P can read
                    ever held them; runs each test; writes the one report on stdout
      └─ program (P)  stdout closed, stdin closed: loads candidate.py, then answers J's requests
                      (call this, get that attribute, apply this operator) with plain data

The verdict is decided only where the program cannot reach:

* **Plain data crosses, never objects.** P answers with JSON that J decodes itself into ``None``,
  ``bool``, ``int``, ``float``, ``complex``, ``str``, ``bytes``, ``list``, ``tuple``, ``set``,
  ``frozenset`` and ``dict`` (exact types: an ``int`` subclass is not an ``int``); anything else
  stays in P and J gets a numbered handle (``judge_proxy.Remote``). J decides every comparison and
  truth test that involves plain data: a handle is never compared with plain data nor asked whether
  it is true (the test errors), and arithmetic on a handle gives a handle (see ``judge_proxy``).
* **P cannot touch J.** J drops its working directory from ``sys.path`` (P can write there), sets
  itself non-dumpable (no ``/proc/J/mem``, ``/proc/J/fd``), and the sandbox's syscall filter refuses
  ``ptrace``, ``process_vm_readv`` and ``pidfd_getfd``. P may kill or stop J: then no report comes,
  which scores as a crash or a timeout (0).
* **One result per test.** J answers every request with the matching reply number; the host
  accepts exactly one report line, with the run's nonce and exactly one result per test.

Trusted inputs (the tests, their ``setup``, and ``context``: the task's own program, which defines
helpers some tests use, as HumanEval's ``poly``) run in J.

With ``untrusted="tests"`` (a tester's asserts against the task's own program) the program comes in
the sealed input, never as a file, and each test runs in a process T of its own that never held the
program's text: J forks a tester zygote (Z) before it reads its input, then for each test forks P
from the program's text and hands the pipes to P to a T that Z forks; T reaches P only as a guarded
proxy (``judge_program.serve``) and reports only its own result::

    judge (J) ── reads the input, forks P for each test, collects each T's result
      ├─ zygote (Z)   forked before the input was read: forks one T per test, then ends its group
      │    └─ T       the test, against P through pipes Z was handed (SCM_RIGHTS)
      └─ program (P)  the task's program, loaded from memory; answers T's behavioural requests
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import sys

if __package__:  # imported on the host (tests)
    from marft_envs.tasks.code import judge_proxy as proxy
    from marft_envs.tasks.code.judge_program import serve
    from marft_envs.tasks.code.judge_proxy import Link, Refused, free_names, run_tests
    from marft_envs.tasks.code.judge_wire import ProgramGone, WireError, decode, receive, send
else:  # the run's main.py: its siblings are files in the working directory, imported before P exists
    import judge_proxy as proxy
    from judge_program import serve
    from judge_proxy import Link, Refused, free_names, run_tests
    from judge_wire import ProgramGone, WireError, decode, receive, send

__all__ = ["free_names", "main"]
PR_SET_DUMPABLE = 4
VERDICTS = ("pass", "fail", "error")


def _start_program(source: str | None = None) -> tuple[int, int, int]:
    """Fork P: ``(pid, request fd, reply fd)`` on J's side; P keeps none of J's channels.

    ``source``: the task's program, handed in memory (P then serves a tester's test, guarded).
    """
    p_reads, j_writes = os.pipe()
    j_reads, p_writes = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            _own_stdio()
            _close_all_but({0, 1, 2, p_reads, p_writes})
            serve(p_reads, p_writes, source)
        except BaseException:
            import traceback

            traceback.print_exc()  # to stderr: a bug here must be visible, not a silent crash
        finally:
            os._exit(70)
    os.close(p_reads)
    os.close(p_writes)
    return pid, j_writes, j_reads


def _own_stdio() -> None:
    # A child's prints go to stderr: stdout is the report's channel, J's alone; stdin (the sealed input) is never its.
    os.dup2(2, 1)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)


def _close_all_but(keep: set[int]) -> None:
    import resource

    for fd in range(3, resource.getrlimit(resource.RLIMIT_NOFILE)[0]):
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def _ended(pid: int) -> str:
    os.kill(pid, signal.SIGKILL)  # P may already be gone; this is then a no-op
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) != signal.SIGKILL:
        return f"signal {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exit status {os.WEXITSTATUS(status)}" if os.WIFEXITED(status) else "killed"


def _read_spec() -> dict:
    chunks = []
    while chunk := os.read(0, 1 << 16):
        chunks.append(chunk)
    return json.loads(b"".join(chunks))


# -- a patch under test (untrusted="program") ------------------------------------------------------


def _untrusted_program(spec: dict, pid: int, requests: int, replies: int) -> dict:
    proxy.LINK = Link(requests, replies)
    try:
        entry = proxy.LINK.request("load", entry_point=spec["entry_point"])
        results = run_tests(spec, entry)
    except Refused as err:
        return {"status": err.status, "reason": err.reason}
    except ProgramGone:
        return {"status": "crash", "reason": f"the program ended the test run ({_ended(pid)})"}
    except WireError as err:
        _ended(pid)
        return {"status": "crash", "reason": f"the program's process broke the judge's protocol ({err})"[:240]}
    _ended(pid)
    return {"status": "ok", "results": results}


# -- a tester's tests (untrusted="tests") ------------------------------------------------------------


def _start_zygote() -> socket.socket:
    """Fork Z, which forks each test's process T; J's end of the socket that hands Z each test's pipes."""
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:
        try:
            mine.close()
            _own_stdio()
            _close_all_but({0, 1, 2, theirs.fileno()})
            _zygote(theirs)
        finally:
            os._exit(70)
    theirs.close()
    return mine


def _zygote(sock: socket.socket) -> None:
    # One T per message; the next only after this one and its process group are gone.
    while True:
        try:
            _, fds, _, _ = socket.recv_fds(sock, 16, 4)
        except OSError:
            os._exit(0)
        if len(fds) != 4:
            os._exit(0)  # EOF: J is done
        pid = os.fork()
        if pid == 0:
            try:
                sock.close()
                _tester(*fds)
            finally:
                os._exit(70)
        for fd in fds:
            os.close(fd)
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # T stays a zombie: its group id cannot be reused yet
        try:
            os.killpg(pid, signal.SIGKILL)  # whatever T started and left in its group
        except OSError:
            pass
        os.waitpid(pid, 0)


def _tester(requests: int, replies: int, job_r: int, result_w: int) -> None:
    """Process T: run one test against P, write its one result. Never returns."""
    os.setpgid(0, 0)
    _own_stdio()
    _close_all_but({0, 1, 2, requests, replies, job_r, result_w})
    result = ["error", "the test's process got no test"]
    try:
        job = receive(job_r)
        os.close(job_r)
        proxy.LINK = Link(requests, replies)
        entry = decode(job["entry"], proxy.Remote)
        spec = {"tests": [job["test"]], "setup": job["setup"], "entry_point": job["entry_point"], "context": ""}
        result = run_tests(spec, entry)[0]
    except BaseException as err:  # the test ended its own process's protocol, or raised past run_tests
        result = ["error", f"the test ended its process: {type(err).__name__}: {err}"[:200]]
    finally:
        try:
            send(result_w, result)
        finally:
            os._exit(0)


def _untrusted_tests(spec: dict, zygote: socket.socket) -> dict:
    results = []
    for test in spec["tests"]:
        pid, requests, replies = _start_program(spec["program"])
        try:
            link = Link(requests, replies)
            entry = link.request("load", entry_point=spec["entry_point"])
            job = {"test": test, "setup": spec["setup"], "entry_point": spec["entry_point"], "entry": link.out(entry)}
            results.append(_one_test(zygote, requests, replies, job))
        except Refused as err:
            return {"status": err.status, "reason": err.reason}
        except (ProgramGone, WireError) as err:
            results.append(["error", f"the program's process failed: {err}"[:200]])
        finally:
            os.close(requests)
            os.close(replies)
            _ended(pid)
    return {"status": "ok", "results": results}


def _one_test(zygote: socket.socket, requests: int, replies: int, job: dict) -> list[str]:
    """Hand T the pipes to P and its test; T's one result (an error when it sent none)."""
    job_r, job_w = os.pipe()
    result_r, result_w = os.pipe()
    try:
        socket.send_fds(zygote, [b"test"], [requests, replies, job_r, result_w])
    except OSError:  # an earlier test killed Z: no T for this one
        pass
    os.close(job_r)
    os.close(result_w)
    try:
        send(job_w, job)
    except OSError:
        pass  # T ended before reading its test: no result comes
    os.close(job_w)
    try:
        result = receive(result_r)
    except WireError:
        result = None
    finally:
        os.close(result_r)
    ok = type(result) is list and len(result) == 2 and result[0] in VERDICTS and type(result[1]) is str
    return [result[0], result[1][:200]] if ok else ["error", "the test ended its process without a result"]


def main() -> None:
    here = os.getcwd()
    sys.path[:] = [p for p in sys.path if p and os.path.abspath(p) != here]  # P can write the workdir
    ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # no /proc/J/mem or /proc/J/fd for P (or T); inherited
    if hasattr(sys, "set_int_max_str_digits"):
        sys.set_int_max_str_digits(0)
    report_fd = os.dup(1)
    os.dup2(2, 1)
    if os.environ.get("MARFT_JUDGE_UNTRUSTED", "program") == "tests":
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # a test that ends Z or T early makes a write fail, not J die
        zygote = _start_zygote()  # before the input is read: no T ever holds the program's text
        spec = _read_spec()
        report = _untrusted_tests(spec, zygote)
        zygote.close()
    else:
        pid, requests, replies = _start_program()  # before the tests are read: P never holds them
        spec = _read_spec()
        report = _untrusted_program(spec, pid, requests, replies)
    line = (spec["nonce"] + json.dumps(report) + "\n").encode()
    view = memoryview(line)
    while view:
        view = view[os.write(report_fd, view) :]
    os._exit(0)


if __name__ == "__main__":
    main()

"""SIGINT and SIGTERM during a run: finish the update, write its checkpoint, stop with 130 or 143.

While :class:`StopOnSignal` is active (the life of ``train()``), the first SIGINT (Ctrl-C) or
SIGTERM (``kill``, a scheduler's preemption) that arrives during an update asks the loop to stop
once that update is done and checkpointed; a second one, or one that arrives outside the update loop
(loading, the evaluations), stops at once. Dynamic sampling starts no further draw once a stop is
asked for (``marft_agents/signal/dynamic.py``), so the update ends soon whatever
``signal.max_draws`` is. Either way the run raises :class:`RunInterrupted`, and since every run file
and checkpoint is written atomically (``run_files``), the newest complete checkpoint is what
``--resume`` continues from. ``marft train`` turns it into one line with that checkpoint and the
``--resume`` command, and exits ``128 + signal`` (130 for SIGINT, 143 for SIGTERM), as a shell does.

Under torchrun every rank gets the signal; rank 0 alone announces and names the checkpoint (the
others stop quietly once it is written), and torchrun kills the ranks ``TORCH_ELASTIC_SHUTDOWN_TIMEOUT``
seconds after forwarding it (30 unless set; ``python -m marft_agents.training.launch`` gives an hour).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""The signals a run stops cleanly on."""


class RunInterrupted(KeyboardInterrupt):
    """A run stopped by a signal: ``signum``, the ``checkpoint`` to resume from, the shell's ``exit_code``.

    A KeyboardInterrupt, so that ``except Exception`` anywhere in the run does not swallow it.
    """

    def __init__(self, signum: int, message: str, checkpoint: Path | None = None):
        super().__init__(message)
        self.signum = signum
        self.checkpoint = checkpoint
        self.exit_code = 128 + signum


class StopOnSignal:
    """SIGINT/SIGTERM handlers for a run: defer to the end of the update (``deferring``), else stop now.

    Installed only in the main thread (Python delivers signals there only); elsewhere it does nothing.
    The handlers in place before are put back on exit.
    """

    def __init__(self, announce: bool = True):
        self.announce = announce
        """Whether this process says what it does with a signal (a data-parallel run: rank 0 alone)."""
        self.deferring = False
        """True while an update runs: a first signal then waits for the update's end."""
        self.requested: int | None = None
        """The signal that asked the loop to stop after the current update, if one did."""
        self._previous: dict[int, object] = {}

    def __enter__(self) -> StopOnSignal:
        if threading.current_thread() is threading.main_thread():
            for signum in SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def take_back(self) -> None:
        """Put this run's handlers back after a library replaced them (``ray.init`` sets its own for SIGTERM)."""
        for signum in self._previous:
            signal.signal(signum, self._handle)

    def __exit__(self, *exc) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    @property
    def name(self) -> str:
        """The requested signal's name (``SIGINT``), or "" when none was."""
        return signal.Signals(self.requested).name if self.requested is not None else ""

    def _handle(self, signum: int, frame) -> None:
        name = signal.Signals(signum).name
        if self.deferring and self.requested is None:
            self.requested = signum
            if self.announce:
                print(
                    f"marft train: {name}: finishing this update and writing its checkpoint (send it again to stop at "
                    f"once){_grace()}",
                    file=sys.stderr,
                    flush=True,
                )
            return
        raise RunInterrupted(signum, f"stopped by {name}")


def _grace() -> str:
    """Under torchrun without a shutdown timeout of its own: how long torchrun lets the ranks finish, else ""."""
    if "TORCHELASTIC_RUN_ID" not in os.environ or os.environ.get("TORCH_ELASTIC_SHUTDOWN_TIMEOUT"):
        return ""
    return (
        "; torchrun kills the ranks 30 s after a signal unless launched with --shutdown-timeout SECONDS "
        "(or python -m marft_agents.training.launch)"
    )

"""What misusing an env raises, what a failing task method raises, and the unknown-option warning.

:class:`EnvUsageError` is the one class for misuse, in every view; its message says what to do
instead, and nothing in the env changed when it is raised. :class:`TaskError` is a task's own bug
surfacing while the base class steps the env (the episode is abandoned; ``reset()`` starts anew).
"""

from __future__ import annotations


class EnvUsageError(RuntimeError, ValueError):
    """The env was misused; the message says what to do instead.

    Raised by every view (layered, AEC, Parallel, Gymnasium) for: using the env before ``reset()``,
    stepping after the episode ended, an ``actions`` that is not a dict, an unknown, waiting or
    finished agent, an action that is not a string or is longer than the action space allows, bad
    ``reset`` arguments, or asking for a view the env does not have. A ``ValueError`` (bad arguments),
    and a ``RuntimeError`` as the ``FlexEnvError`` of earlier releases was, so existing handlers of
    either still catch it. Nothing changed in the env when it is raised: fix the call and go on.
    """


FlexEnvError = EnvUsageError
"""The earlier name of :class:`EnvUsageError` (the same class)."""


class UnknownOptionWarning(UserWarning):
    """A ``reset(options=...)`` key the task does not read (often a misspelling): it is ignored."""


class TaskError(RuntimeError):
    """A task method raised while the base class stepped the env; the episode is abandoned, ``reset()`` starts anew."""

"""Text that crosses the env boundary: every observation and every action is valid Unicode text.

A Python ``str`` may hold lone surrogates (``"\\ud800"``), which no UTF-8 encoder accepts: a
tokenizer, a file write or a subprocess pipe raises on them. They reach an env in two ways: an
action string that holds one, or text the env decodes itself (a JSON ``"\\ud800"`` escape in a tool
argument). :class:`~marft_envs.core.FlexEnv` passes every action it receives and every observation
it emits through :func:`valid_text`, so tasks never see such text and agents never get it.
"""

from __future__ import annotations


def valid_text(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD (a surrogate pair is joined); valid text is returned as is."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # UTF-16 with surrogatepass joins a high+low pair into one character; what is left unpaired
        # cannot decode and becomes U+FFFD, the replacement character.
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text

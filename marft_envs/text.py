"""Text that crosses the env boundary: every observation and every action is valid Unicode text;
and text printed to a terminal runs no escape sequence (:func:`terminal_text`).

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


TERMINAL_ESCAPES = {
    **{c: f"\\x{c:02x}" for c in [*range(0x20), 0x7F, *range(0x80, 0xA0)] if c not in (0x09, 0x0A)},
    **{c: f"\\u{c:04x}" for c in [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]},
}
"""What :func:`terminal_text` escapes: every C0 and C1 control but tab and newline (ESC starts the
terminal's commands: OSC 52 writes the clipboard, others set the window title or erase lines; CR
overwrites a line; 0x9B is a one-byte CSI), and the bidirectional embeddings, overrides and isolates
(U+202A-U+202E, U+2066-U+2069), which reorder what is shown and so hide text."""


def terminal_text(text: str) -> str:
    """``text`` safe to print to a terminal: the characters in :data:`TERMINAL_ESCAPES` shown as ``\\x1b`` or ``\\u202e``.

    For text a model or an env wrote (actions, observations): printed raw, its escape sequences would
    be run by the terminal. Newlines and tabs stay; everything else printable is unchanged.
    """
    return text.translate(TERMINAL_ESCAPES)

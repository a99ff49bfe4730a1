"""Text a model or an env wrote is printed with its control characters shown, never run by the terminal."""

from __future__ import annotations

import pytest

import marft_envs
from marft_envs.text import terminal_text


@pytest.mark.parametrize(
    "text, shown",
    [
        ("plain text, é and 漢字 stay", "plain text, é and 漢字 stay"),
        ("two\nlines\tand a tab", "two\nlines\tand a tab"),  # newline and tab are kept
        ("\x1b]52;c;ZXZpbA==\x07", "\\x1b]52;c;ZXZpbA==\\x07"),  # OSC 52: a clipboard write
        ("\x1b]0;title\x07", "\\x1b]0;title\\x07"),  # the window's title
        ("\x1b[2K\x1b[1A", "\\x1b[2K\\x1b[1A"),  # erase the line, go up one
        ("\x1b[8mhidden\x1b[0m", "\\x1b[8mhidden\\x1b[0m"),  # concealed text
        ("shown\rcovered", "shown\\x0dcovered"),  # a carriage return writes over the line
        ("\x00\x08\x7f", "\\x00\\x08\\x7f"),  # NUL, backspace, DEL
        ("\x9b2J", "\\x9b2J"),  # a one-character CSI (C1)
        ("abc\u202edef\u2066g\u2069", "abc\\u202edef\\u2066g\\u2069"),  # bidirectional overrides and isolates
        ("\\x1b as written", "\\x1b as written"),  # a backslash is not escaped again
    ],
)
def test_terminal_text_escapes_every_control_but_newline_and_tab(text, shown):
    assert terminal_text(text) == shown


def test_every_control_character_but_newline_and_tab_is_escaped():
    controls = [chr(c) for c in [*range(0x20), 0x7F, *range(0x80, 0xA0)] if chr(c) not in "\n\t"]
    assert all(terminal_text(c).startswith("\\x") for c in controls)
    assert all(terminal_text(chr(c)) == chr(c) for c in range(0x20, 0x7F))


def test_human_render_shows_an_actions_escape_sequences(capsys):
    env = marft_envs.make("marft/MathChain-v0", render_mode="human", rounds=2)
    env.reset(seed=0)
    env.step({"reasoner_0": "think \x1b]52;c;ZXZpbA==\x07"})
    env.render()
    out = capsys.readouterr().out
    assert "\x1b" not in out and "think \\x1b]52;c;ZXZpbA==\\x07" in out

"""`marft show` prints transcripts with the escape sequences of model and env text shown, not run."""

from __future__ import annotations

import json


def test_marft_show_escapes_control_characters_in_transcripts(tmp_path, capsys):
    from marft_agents.cli import main as cli

    step = {
        "round": 0,
        "agent": "actor_0\x1b[2K",
        "reward": 0.0,
        "reward_components": {},
        "observation": {"text": "Problem \x1b]0;pwned\x07 ok\nline two"},
        "action": "\\boxed{7}\x1b]52;c;ZXZpbA==\x07\r\x1b[8mhidden",
    }
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"episode": 0, "solved": False, "return": 0.0, "steps": [step]}) + "\n")
    assert cli(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert not any(c in out for c in "\x1b\x07\r")
    assert "\\boxed{7}\\x1b]52;c;ZXZpbA==\\x07\\x0d\\x1b[8mhidden" in out and "actor_0\\x1b[2K" in out
    assert "Problem \\x1b]0;pwned\\x07 ok\nline two" in out  # the newline is kept

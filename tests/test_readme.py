"""The README's example runs as written."""

import re
from pathlib import Path


def test_readme_example_runs(capsys):
    text = (Path(__file__).parent.parent / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks, "the README lost its python example"
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})
    assert "{'reasoner_0'" in capsys.readouterr().out

"""Role profiles shared by the task families: which prompt each agent's role gets.

A profile is ``{"roles": {role: prompt}}``; an agent ``"<role>_<k>"`` plays ``role``. Each family
(MATH, code repair, booking) ships a ``profiles/default.json`` in its own package.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import Any


def load_profile(profile: str | Path | dict, package: str, agents: Iterable[str] = ()) -> dict[str, Any]:
    """Role prompts: ``"default"`` (``package``'s shipped one), a path to a JSON file, or a dict ``{"roles": {...}}``.

    Every role of ``agents`` must have a prompt.
    """
    if isinstance(profile, dict):
        data = profile
    elif str(profile) == "default":
        data = json.loads(resources.files(package).joinpath("profiles/default.json").read_text())
    else:
        path = Path(profile)
        if not path.is_file():
            raise FileNotFoundError(f"no such profile file: {path}; pass 'default' or a JSON file with a 'roles' mapping")
        data = json.loads(path.read_text())
    if not isinstance(data.get("roles"), dict):
        raise ValueError("a profile needs a 'roles' mapping from role name to role prompt")
    missing = sorted({role_of(a) for a in agents} - set(data["roles"]))
    if missing:
        raise ValueError(f"the profile has no prompt for roles {missing}; add them under 'roles'")
    return data


def role_of(agent: str) -> str:
    """``"reasoner_0"`` -> ``"reasoner"``."""
    return agent.rsplit("_", 1)[0]

"""Role profiles shared by the task families: which prompt each agent's role gets.

A profile is ``{"roles": {role: prompt}}``; an agent ``"<role>_<k>"`` plays ``role``. Each family
(MATH, code repair, booking) ships ``profiles/<name>.json`` files in its own package and selects one by
name with the env option ``profile=``: ``default`` (the prompts the embedded model was pre-trained on)
and, where shipped, versioned profiles for general instruct models such as ``general-v0``. A shipped
profile never changes once released; a changed one gets the next version (``general-v1``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import Any


def load_profile(profile: str | Path | dict, package: str, agents: Iterable[str] = ()) -> dict[str, Any]:
    """Role prompts: a profile ``package`` ships (by name), a path to a JSON file, or a dict ``{"roles": {...}}``.

    Every role of ``agents`` must have a prompt.
    """
    if isinstance(profile, dict):
        data = profile
    elif isinstance(profile, str) and profile in shipped(package):
        data = json.loads(resources.files(package).joinpath(f"profiles/{profile}.json").read_text())
    else:
        path = Path(profile)
        if not path.is_file():
            names = ", ".join(repr(n) for n in shipped(package))
            raise FileNotFoundError(
                f"no such profile: {str(profile)!r}; pass a shipped one ({names}) or a JSON file with a 'roles' mapping"
            )
        data = json.loads(path.read_text())
    if not isinstance(data.get("roles"), dict):
        raise ValueError("a profile needs a 'roles' mapping from role name to role prompt")
    missing = sorted({role_of(a) for a in agents} - set(data["roles"]))
    if missing:
        raise ValueError(f"the profile has no prompt for roles {missing}; add them under 'roles'")
    return data


def shipped(package: str) -> list[str]:
    """Names of the profiles ``package`` ships, ``"default"`` first."""
    files = resources.files(package).joinpath("profiles").iterdir()
    names = sorted(f.name[: -len(".json")] for f in files if f.name.endswith(".json"))
    return sorted(names, key=lambda n: n != "default")


def role_of(agent: str) -> str:
    """``"reasoner_0"`` -> ``"reasoner"``."""
    return agent.rsplit("_", 1)[0]

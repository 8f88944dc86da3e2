import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest  # noqa: E402

from tests.helpers import make_item  # noqa: E402


@pytest.fixture
def sample_item():
    return make_item

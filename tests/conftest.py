"""Shared test settings."""

import pytest
import torch


@pytest.fixture(autouse=True, scope="session")
def one_thread():
    """Tests use small tensors: one intra-op thread avoids oversubscribing the 2 CI cores."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)

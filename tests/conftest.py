import os
import socket

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

# the `zoo` commands the tests start use torch's default thread count whatever the load (zoo.threads
# picks fewer on a busy machine), so runs that are compared (resumes, 1 vs 2 processes) sum floats
# in the same order
os.environ.setdefault("ZOO_THREADS", str(torch.get_num_threads()))

from tasks.extras import preload_libusb  # noqa: E402
from tests.helpers import make_item  # noqa: E402

preload_libusb()  # before any test imports open3d (pytest.importorskip does not go through tasks.extras)

_connect = socket.socket.connect


def _local_only(sock, address):
    """Tests never reach the network: only loopback (DDP rendezvous) and Unix sockets connect."""
    host = address[0] if isinstance(address, tuple) else None
    if (
        host is not None
        and host not in ("localhost", "127.0.0.1", "::1", "0.0.0.0")
        and not str(host).startswith("127.")
    ):
        raise ConnectionRefusedError(f"tests may not open network connections (to {address!r})")
    return _connect(sock, address)


socket.socket.connect = _local_only


@pytest.fixture
def sample_item():
    return make_item

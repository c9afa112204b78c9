"""devnet.sh and SIGTERM: a service manager's stop ends everything and exits 143 (128 + 15).

The SIGINT (Ctrl-C, 130) twin is in test_devnet.py, with the dashboard snapshot.
"""

from __future__ import annotations

import signal

import pytest

from tests.integration.test_devnet import (assert_stopped_everything, free_base_port, start_nodes_only_devnet,
                                           stop_devnet)

pytestmark = pytest.mark.slow


def test_sigterm_stops_everything_and_exits_143(tmp_path):
    devnet = start_nodes_only_devnet(tmp_path, free_base_port())
    output = stop_devnet(devnet, signal.SIGTERM)
    assert devnet.returncode == 143, output
    assert_stopped_everything(output, tmp_path)

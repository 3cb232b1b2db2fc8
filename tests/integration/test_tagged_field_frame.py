"""One Fetch v17 frame whose known tagged field declares more bytes than its value used to abort the
broker (kio read on past the value into bytes the guard had skipped). Now only that connection
closes."""

from __future__ import annotations

import struct

import pytest

from samsa.testing import SamsaBroker
from tests.unit.test_request_guard_tags import _oversized_tag
from tests.wire import Wire

pytestmark = pytest.mark.timeout(60)


def test_oversized_known_tag_closes_only_its_connection(samsa_broker: SamsaBroker) -> None:
    w = Wire(samsa_broker.bootstrap)
    frame = _oversized_tag()
    w.send_raw(struct.pack(">i", len(frame)) + frame)
    assert w.is_closed(5)
    other = Wire(samsa_broker.bootstrap, timeout=5)
    resp = other.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})
    assert int(resp.error_code) == 0

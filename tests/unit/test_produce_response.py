"""The hand-written Produce response encoder must produce exactly kio's bytes."""

from __future__ import annotations

import pytest

from samsa.protocol.codec import encode_response
from samsa.protocol.produce_response import encode_produce_response


@pytest.mark.parametrize("version", range(3, 12))
def test_matches_kio_for_every_version(version: int) -> None:
    responses = [
        {"name": "alpha", "partition_responses": [
            {"index": 0, "error_code": 0, "base_offset": 42, "log_append_time": -1,
             "log_start_offset": 7, "record_errors": (), "error_message": None},
            {"index": 3, "error_code": 87, "base_offset": -1, "log_append_time": -1,
             "log_start_offset": -1, "error_message": "bad batch",
             "record_errors": ({"batch_index": 0, "batch_index_error_message": "no key"},
                               {"batch_index": 4, "batch_index_error_message": None})}]},
        {"name": "b", "partition_responses": [
            {"index": 1, "error_code": 0, "base_offset": 2**40, "log_append_time": 1_700_000_000_123,
             "log_start_offset": 0, "record_errors": (), "error_message": None}]},
    ]
    mine = b"".join(encode_produce_response(version, 99, responses))
    ref = b"".join(encode_response(0, version, 99, {"responses": responses, "throttle_time": 0}))
    assert mine == ref

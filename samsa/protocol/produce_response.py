"""Hand-written Produce response encoder (v3–v11): the produce hot path answers with struct packing
instead of kio's generic writer (notes/kio.md measured ~10× less time)."""

from __future__ import annotations

import struct
from typing import Any

from samsa.protocol.codec import uvarint as _uvarint
from samsa.protocol.leader_hint import NodeEndpoint, partition_tags, top_level_tags

_I32 = struct.Struct(">i")
_PART_V3 = struct.Struct(">ihqq")       # index, error, base offset, log append time
_PART_V5 = struct.Struct(">ihqqq")      # + log start offset
_CORR = struct.Struct(">i")


def _nullable_str(s: str | None, flexible: bool) -> bytes:
    if s is None:
        return b"\x00" if flexible else b"\xff\xff"
    b = s.encode()
    return (_uvarint(len(b) + 1) if flexible else struct.pack(">h", len(b))) + b


def encode_produce_response(version: int, correlation_id: int,
                            responses: list[dict[str, Any]],
                            node_endpoints: list[NodeEndpoint] | None = None,
                            throttle_time_ms: int = 0) -> list[bytes]:
    """Length-prefixed frame for a Produce response built by handlers.produce, as one chunk.
    From v10 a partition's "current_leader" (leader id, epoch) and `node_endpoints` are sent
    (KIP-951); `node_endpoints` is None when no partition has one (possibly [] otherwise)."""
    kip951 = version >= 10
    hinted = kip951 and node_endpoints is not None  # some partition has a current_leader
    flexible = version >= 9
    out = bytearray(b"\0\0\0\0")  # size, patched at the end
    out += _CORR.pack(correlation_id)
    if flexible:
        out += b"\x00"  # response header v1 tagged fields
        out += _uvarint(len(responses) + 1)
    else:
        out += _I32.pack(len(responses))
    v5 = version >= 5
    v8 = version >= 8
    part_struct = _PART_V5 if v5 else _PART_V3
    for topic in responses:
        name = topic["name"].encode()
        parts = topic["partition_responses"]
        if flexible:
            out += _uvarint(len(name) + 1) + name + _uvarint(len(parts) + 1)
        else:
            out += struct.pack(">h", len(name)) + name + _I32.pack(len(parts))
        for p in parts:
            if v5:
                out += part_struct.pack(p["index"], int(p["error_code"]), p["base_offset"],
                                        p["log_append_time"], p["log_start_offset"])
            else:
                out += part_struct.pack(p["index"], int(p["error_code"]), p["base_offset"],
                                        p["log_append_time"])
            if v8:
                errors = p.get("record_errors") or ()
                out += _uvarint(len(errors) + 1) if flexible else _I32.pack(len(errors))
                for e in errors:
                    out += _I32.pack(e["batch_index"])
                    out += _nullable_str(e.get("batch_index_error_message"), flexible)
                    if flexible:
                        out += b"\x00"
                out += _nullable_str(p.get("error_message"), flexible)
            if hinted and "current_leader" in p:
                out += partition_tags(0, p["current_leader"])
            elif flexible:
                out += b"\x00"  # partition tagged fields
        if flexible:
            out += b"\x00"  # topic tagged fields
    out += _I32.pack(throttle_time_ms)
    if kip951:
        out += top_level_tags(node_endpoints)
    elif flexible:
        out += b"\x00"  # top-level tagged fields
    _I32.pack_into(out, 0, len(out) - 4)
    return [bytes(out)]

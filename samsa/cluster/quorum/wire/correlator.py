"""Correlation ids and in-flight requests of one node: what a transport needs to pair frames with
the core's messages."""

from __future__ import annotations

import struct

from samsa.cluster.quorum import messages as m
from samsa.cluster.quorum.wire.errors import WireError
from samsa.cluster.quorum.wire.frames import (
    CoreRequest,
    CoreResponse,
    api_key_of,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)

_SIZE = struct.Struct(">i")


class Correlator:
    """One node's RPC bookkeeping on the wire, as a transport needs it.

    Outgoing requests get correlation ids; the one in flight per (peer, api key) is remembered so
    its response can be decoded (the core's echo fields come from it). A newer request to the same
    peer and kind replaces the older one, whose late answer is then dropped, as Kafka's RaftClient
    does. Incoming requests are remembered per (peer, api key) until the core answers them. Both
    maps hold at most one entry per peer and api key.
    """

    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        self._next = 0
        self._sent: dict[int, tuple[int, CoreRequest]] = {}  # correlation id -> (peer, request)
        self._slot: dict[tuple[int, int], int] = {}  # (peer, api key) -> correlation id in flight
        self._received: dict[tuple[int, int], int] = {}  # (peer, api key) -> id to answer with

    def request_frame(self, dst: int, req: CoreRequest) -> bytes:
        """The frame to send `req` to `dst` with."""
        self._next = (self._next + 1) & 0x7FFFFFFF
        key = api_key_of(req)
        old = self._slot.pop((dst, key), None)
        if old is not None:
            self._sent.pop(old, None)
        self._slot[(dst, key)] = self._next
        self._sent[self._next] = (dst, req)
        return encode_request(req, self._next, client_id=f"raft-{self.node_id}")

    def response_message(self, src: int, frame: bytes) -> m.Message | None:
        """The core message for a response frame from `src`; None when it answers no request in
        flight (a late answer to a replaced request). Raises WireError if it is malformed."""
        if len(frame) < 4:
            raise WireError(f"response frame of {len(frame)} bytes has no header")
        (corr,) = _SIZE.unpack_from(frame, 0)
        sent = self._sent.get(corr)
        if sent is None or sent[0] != src:
            return None
        _, req = sent
        _, resp = decode_response(frame, req)
        del self._sent[corr]
        self._slot.pop((src, api_key_of(req)), None)
        return m.Message(src, self.node_id, resp)  # type: ignore[arg-type]

    def request_message(self, src: int, frame: bytes) -> m.Message:
        """The core message for a request frame from `src`. Raises WireError if it is malformed."""
        corr, req = decode_request(frame)
        self._received[(src, api_key_of(req))] = corr
        return m.Message(src, self.node_id, req)  # type: ignore[arg-type]

    def response_frame(self, dst: int, resp: CoreResponse) -> bytes | None:
        """The frame answering `dst`'s request with `resp`; None if no request of that kind from
        `dst` awaits an answer (it was answered already)."""
        corr = self._received.pop((dst, api_key_of(resp)), None)
        return None if corr is None else encode_response(resp, corr)

    def failed(self, dst: int) -> list[m.Message]:
        """The connection to `dst` broke: a RequestFailed for each request in flight to it."""
        out = []
        for (peer, key), corr in list(self._slot.items()):
            if peer == dst:
                del self._slot[(peer, key)]
                _, req = self._sent.pop(corr)
                if not isinstance(req, m.DescribeQuorumRequest):
                    out.append(m.Message(dst, self.node_id, m.RequestFailed(req)))
        return out

"""The Raft core's messages on Kafka's wire: KRaft RPC frames (`frames`), log entries as record
batches (`entries`), and a node's correlation bookkeeping (`correlator`). Not used by a transport
yet; `WireError` is the only exception any decode path raises.
"""

from samsa.cluster.quorum.wire.correlator import Correlator
from samsa.cluster.quorum.wire.entries import decode_entries, encode_entries
from samsa.cluster.quorum.wire.errors import WireError
from samsa.cluster.quorum.wire.frames import (
    FETCH_MAX_BYTES,
    METADATA_TOPIC,
    METADATA_TOPIC_ID,
    TOP_LEVEL_ERRORS,
    VERSIONS,
    CoreRequest,
    CoreResponse,
    api_key_of,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    sized,
    top_level_error,
)

__all__ = [
    "FETCH_MAX_BYTES",
    "METADATA_TOPIC",
    "METADATA_TOPIC_ID",
    "TOP_LEVEL_ERRORS",
    "VERSIONS",
    "CoreRequest",
    "CoreResponse",
    "Correlator",
    "WireError",
    "api_key_of",
    "decode_entries",
    "decode_request",
    "decode_response",
    "encode_entries",
    "encode_request",
    "encode_response",
    "sized",
    "top_level_error",
]

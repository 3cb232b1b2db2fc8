"""The one exception of the wire mapping."""


class WireError(ValueError):
    """A frame that is not a well-formed KRaft RPC of the expected kind (Kafka closes the
    connection or answers INVALID_REQUEST)."""

"""The controller: decides every metadata change (topics, partitions, configs, broker
registrations, fencing, producer id blocks) and writes it as records.

`QuorumController` (quorum.py) runs on the active controller of the KRaft quorum: it validates
against the committed image and proposes records through the quorum."""

from ..limits import ControllerError
from .quorum import HeartbeatReply, QuorumController
from .validation import validate_topic_name

__all__ = ["ControllerError", "HeartbeatReply", "QuorumController", "validate_topic_name"]

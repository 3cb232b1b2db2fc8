"""Cluster metadata: KRaft's record types (`records`), the image every node builds from them
(`image`), and, until the quorum is wired in, the single-node JSON metadata log (`legacy`)."""

from .legacy import METADATA_TOPIC, MetadataImage, MetadataLog, TopicImage

__all__ = ["METADATA_TOPIC", "MetadataImage", "MetadataLog", "TopicImage"]

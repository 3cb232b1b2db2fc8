"""Cluster metadata: KRaft's record types (`records`), the image every node builds from them
(`image`), snapshots of it (`snapshot`), and the reader of the old single-node JSON metadata log
(`legacy`, `migrate`) that start-up migrates."""

from .image import BrokerRegistration, MetadataImage, PartitionState, TopicImage

METADATA_TOPIC = "__cluster_metadata"

__all__ = ["METADATA_TOPIC", "BrokerRegistration", "MetadataImage", "PartitionState", "TopicImage"]

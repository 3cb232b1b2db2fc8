"""Partition replication: the leader's view of its followers, followers' fetchers, and the
ReplicaManager that applies the image's roles to this broker's replicas."""

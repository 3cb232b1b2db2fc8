"""Kafka's request names (ApiKeys' names, the `request` label of kafka.network RequestMetrics)."""

from __future__ import annotations

_NAMES = (
    "Produce Fetch ListOffsets Metadata LeaderAndIsr StopReplica UpdateMetadata ControlledShutdown "
    "OffsetCommit OffsetFetch FindCoordinator JoinGroup Heartbeat LeaveGroup SyncGroup "
    "DescribeGroups ListGroups SaslHandshake ApiVersions CreateTopics DeleteTopics DeleteRecords "
    "InitProducerId OffsetForLeaderEpoch AddPartitionsToTxn AddOffsetsToTxn EndTxn WriteTxnMarkers "
    "TxnOffsetCommit DescribeAcls CreateAcls DeleteAcls DescribeConfigs AlterConfigs "
    "AlterReplicaLogDirs DescribeLogDirs SaslAuthenticate CreatePartitions CreateDelegationToken "
    "RenewDelegationToken ExpireDelegationToken DescribeDelegationToken DeleteGroups ElectLeaders "
    "IncrementalAlterConfigs AlterPartitionReassignments ListPartitionReassignments OffsetDelete "
    "DescribeClientQuotas AlterClientQuotas DescribeUserScramCredentials AlterUserScramCredentials "
    "Vote BeginQuorumEpoch EndQuorumEpoch DescribeQuorum AlterPartition UpdateFeatures Envelope "
    "FetchSnapshot DescribeCluster DescribeProducers BrokerRegistration BrokerHeartbeat "
    "UnregisterBroker DescribeTransactions ListTransactions AllocateProducerIds "
    "ConsumerGroupHeartbeat ConsumerGroupDescribe ControllerRegistration GetTelemetrySubscriptions "
    "PushTelemetry AssignReplicasToDirs ListClientMetricsResources DescribeTopicPartitions"
).split()


def request_name(api_key: int, follower: bool = False) -> str:
    """Kafka splits Fetch into FetchConsumer and FetchFollower in its request metrics."""
    if api_key == 1:
        return "FetchFollower" if follower else "FetchConsumer"
    return _NAMES[api_key] if 0 <= api_key < len(_NAMES) else f"Api{api_key}"

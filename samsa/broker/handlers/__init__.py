"""API handlers, one module per API family. Each takes (broker, ctx, request) and returns a
response dict, an awaitable of one, or None (no response)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from samsa.protocol import apis

from . import (
    acls,
    admin,
    cluster_gate,
    configs,
    controller_apis,
    controller_authz,
    fetch,
    groups,
    markers,
    meta,
    offsets,
    produce,
    producer_ids,
    quotas,
    sasl,
    topics,
    txn,
)

HANDLERS: dict[int, Any] = {
    apis.API_VERSIONS: meta.api_versions,
    apis.METADATA: meta.metadata,
    apis.DESCRIBE_CLUSTER: meta.describe_cluster,
    apis.PRODUCE: produce.produce,
    apis.FETCH: fetch.fetch,
    apis.LIST_OFFSETS: offsets.list_offsets,
    apis.DELETE_RECORDS: offsets.delete_records,
    apis.OFFSET_FOR_LEADER_EPOCH: offsets.offset_for_leader_epoch,
    apis.CREATE_TOPICS: topics.create_topics,
    apis.DELETE_TOPICS: topics.delete_topics,
    apis.CREATE_PARTITIONS: topics.create_partitions,
    apis.DESCRIBE_CONFIGS: configs.describe_configs,
    apis.ALTER_CONFIGS: configs.alter_configs,
    apis.INCREMENTAL_ALTER_CONFIGS: configs.incremental_alter_configs,
    apis.DESCRIBE_LOG_DIRS: configs.describe_log_dirs,
    apis.INIT_PRODUCER_ID: producer_ids.init_producer_id,
    apis.FIND_COORDINATOR: groups.find_coordinator,
    apis.JOIN_GROUP: groups.join_group,
    apis.SYNC_GROUP: groups.sync_group,
    apis.HEARTBEAT: groups.heartbeat,
    apis.LEAVE_GROUP: groups.leave_group,
    apis.OFFSET_COMMIT: groups.offset_commit,
    apis.OFFSET_FETCH: groups.offset_fetch,
    apis.OFFSET_DELETE: groups.offset_delete,
    apis.LIST_GROUPS: groups.list_groups,
    apis.DESCRIBE_GROUPS: groups.describe_groups,
    apis.DELETE_GROUPS: groups.delete_groups,
    apis.ADD_PARTITIONS_TO_TXN: txn.add_partitions_to_txn,
    apis.ADD_OFFSETS_TO_TXN: txn.add_offsets_to_txn,
    apis.END_TXN: txn.end_txn,
    apis.WRITE_TXN_MARKERS: markers.write_txn_markers,
    apis.TXN_OFFSET_COMMIT: txn.txn_offset_commit,
    apis.DESCRIBE_PRODUCERS: txn.describe_producers,
    apis.DESCRIBE_TRANSACTIONS: txn.describe_transactions,
    apis.LIST_TRANSACTIONS: txn.list_transactions,
    apis.CONSUMER_GROUP_HEARTBEAT: groups.consumer_group_heartbeat,
    apis.CONSUMER_GROUP_DESCRIBE: groups.consumer_group_describe,
    apis.DESCRIBE_TOPIC_PARTITIONS: admin.describe_topic_partitions,
    apis.DESCRIBE_QUORUM: admin.describe_quorum,
    apis.ELECT_LEADERS: admin.elect_leaders,
    apis.ALTER_PARTITION_REASSIGNMENTS: admin.alter_partition_reassignments,
    apis.LIST_PARTITION_REASSIGNMENTS: admin.list_partition_reassignments,
    apis.ALTER_REPLICA_LOG_DIRS: admin.alter_replica_log_dirs,
    apis.DESCRIBE_ACLS: acls.describe_acls,
    apis.CREATE_ACLS: acls.create_acls,
    apis.DELETE_ACLS: acls.delete_acls,
    # client quotas (helper "quotas")
    apis.DESCRIBE_CLIENT_QUOTAS: quotas.describe_client_quotas,
    apis.ALTER_CLIENT_QUOTAS: quotas.alter_client_quotas,
    # SASL (helper sasl): exchanges themselves run in samsa.security.sasl.authenticator
    apis.SASL_HANDSHAKE: sasl.sasl_handshake,
    apis.SASL_AUTHENTICATE: sasl.sasl_authenticate,
    apis.DESCRIBE_USER_SCRAM_CREDENTIALS: sasl.describe_user_scram_credentials,
    apis.ALTER_USER_SCRAM_CREDENTIALS: sasl.alter_user_scram_credentials,
}
# ACLs (issue 17): the cluster-wide APIs check their cluster operation first (on broker
# listeners; authz skips CONTROLLER listeners)
HANDLERS.update({api: cluster_gate.gated(api, HANDLERS[api]) for api in cluster_gate.GATES})


CONTROLLER_HANDLERS: dict[int, Any] = {
    apis.API_VERSIONS: controller_apis.api_versions,
    apis.FETCH: controller_apis.quorum_rpc,
    apis.VOTE: controller_apis.quorum_rpc,
    apis.BEGIN_QUORUM_EPOCH: controller_apis.quorum_rpc,
    apis.END_QUORUM_EPOCH: controller_apis.quorum_rpc,
    apis.DESCRIBE_QUORUM: admin.describe_quorum,
    apis.FETCH_SNAPSHOT: controller_apis.quorum_rpc,
    apis.BROKER_REGISTRATION: controller_apis.broker_registration,
    apis.BROKER_HEARTBEAT: controller_apis.broker_heartbeat,
    apis.ALLOCATE_PRODUCER_IDS: controller_apis.allocate_producer_ids,
    apis.CREATE_TOPICS: topics.create_topics,
    apis.DELETE_TOPICS: topics.delete_topics,
    apis.CREATE_PARTITIONS: topics.create_partitions,
    apis.ALTER_CONFIGS: configs.alter_configs,
    apis.INCREMENTAL_ALTER_CONFIGS: configs.incremental_alter_configs,
    apis.DESCRIBE_CLUSTER: meta.describe_cluster,
    apis.ALTER_PARTITION: controller_apis.alter_partition,
    apis.ELECT_LEADERS: admin.elect_leaders,
    apis.ALTER_PARTITION_REASSIGNMENTS: admin.alter_partition_reassignments,
    apis.LIST_PARTITION_REASSIGNMENTS: admin.list_partition_reassignments,
    apis.CREATE_ACLS: acls.create_acls,
    apis.DELETE_ACLS: acls.delete_acls,
    apis.ALTER_CLIENT_QUOTAS: quotas.alter_client_quotas,  # forwarded by brokers
    apis.ALTER_USER_SCRAM_CREDENTIALS: sasl.alter_user_scram_credentials,  # forwarded (sasl)
}

# node-to-node security (sec-cluster): SASL on CONTROLLER listeners (the exchange runs in
# samsa.security.sasl.authenticator; these answer the requests outside one), then Kafka's
# ControllerApis authorization (handlers/controller_authz.py; cluster_gate for the cluster-wide
# admin APIs a client may also send there)
CONTROLLER_HANDLERS[apis.SASL_HANDSHAKE] = sasl.sasl_handshake
CONTROLLER_HANDLERS[apis.SASL_AUTHENTICATE] = sasl.sasl_authenticate
CONTROLLER_HANDLERS.update({api: cluster_gate.gated(api, CONTROLLER_HANDLERS[api])
                            for api in cluster_gate.GATES
                            if api in CONTROLLER_HANDLERS and api != apis.DESCRIBE_QUORUM})
CONTROLLER_HANDLERS.update(controller_authz.gate_all(CONTROLLER_HANDLERS))


@dataclass(frozen=True, slots=True)
class ListenerSpec:
    """What a listener serves: its handlers, the versions it accepts and advertises."""

    controller: bool
    handlers: dict[int, Any]
    supported: dict[int, tuple[int, int]]
    advertised: dict[int, tuple[int, int]]


BROKER_SPEC = ListenerSpec(False, HANDLERS, apis.SUPPORTED, apis.ADVERTISED)
CONTROLLER_SPEC = ListenerSpec(True, CONTROLLER_HANDLERS, apis.CONTROLLER_SUPPORTED,
                               apis.CONTROLLER_SUPPORTED)

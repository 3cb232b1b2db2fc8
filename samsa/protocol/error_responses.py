"""The answer to a request whose handler failed: Kafka's AbstractRequest.getErrorResponse.

When a handler raises, Kafka does not drop the connection: it answers the request with the API's
error response (KafkaApis/RequestHandlerHelper.handleError), built from the request itself: the
error code (UNKNOWN_SERVER_ERROR, -1, for an unexpected exception) on every topic, partition,
group or resource the request named, and at the top level where the response has one. The client
then handles the error as it would any other (retry, refresh metadata, fail the call) and the
connection keeps serving. Only acks=0 produce has no response: Kafka closes the connection then.

`error_response` returns the response as a dict for `codec.encode_response` (fields the
negotiated version lacks are dropped there, missing ones zeroed), or None for "close instead".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from . import apis

UNKNOWN_SERVER_ERROR = -1

Body = Any
Builder = Callable[[Body, int, int], dict[str, Any] | None]


def _items(value: Iterable[Any] | None) -> list[Any]:
    return list(value) if value is not None else []


def _get(obj: Any, *names: str, default: Any = None) -> Any:
    """The first of `names` the request has (field names moved between versions)."""
    for name in names:
        if hasattr(obj, name):
            return getattr(obj, name)
    return default


# ---- data ----------------------------------------------------------------------------------
def _produce(req: Body, v: int, e: int) -> dict[str, Any] | None:
    if req.acks == 0:
        return None  # no response at all: Kafka closes the connection
    return {"responses": [
        {"name": t.name, "partition_responses": [
            {"index": p.index, "error_code": e, "base_offset": -1, "log_append_time": -1,
             "log_start_offset": -1} for p in _items(t.partition_data)]}
        for t in _items(req.topic_data)]}


def _fetch_partition(index: int, e: int) -> dict[str, Any]:
    return {"partition_index": index, "error_code": e, "high_watermark": -1,
            "last_stable_offset": -1, "log_start_offset": -1, "aborted_transactions": None,
            "preferred_read_replica": -1, "records": None}


def _fetch(req: Body, v: int, e: int) -> dict[str, Any]:
    # v13+ (topic ids): the top-level error alone; older versions also every partition
    topics = [] if v >= 13 else [
        {"topic": t.topic, "partitions": [_fetch_partition(p.partition, e)
                                          for p in _items(t.partitions)]}
        for t in _items(req.topics)]
    return {"error_code": e, "session_id": _get(req, "session_id", default=0),
            "responses": topics}


def _list_offsets(req: Body, v: int, e: int) -> dict[str, Any]:
    return {"topics": [
        {"name": t.name, "partitions": [
            {"partition_index": p.partition_index, "error_code": e, "timestamp": -1,
             "offset": -1, "leader_epoch": -1} for p in _items(t.partitions)]}
        for t in _items(req.topics)]}


def _metadata(req: Body, v: int, e: int) -> dict[str, Any]:
    return {"error_code": e, "controller_id": -1, "topics": [
        {"name": t.name or "", "topic_id": _get(t, "topic_id"), "error_code": e,
         "is_internal": False, "partitions": []} for t in _items(req.topics)]}


def _offset_for_leader_epoch(req: Body, v: int, e: int) -> dict[str, Any]:
    return {"topics": [
        {"topic": t.topic, "partitions": [
            {"partition": p.partition, "error_code": e, "leader_epoch": -1, "end_offset": -1}
            for p in _items(t.partitions)]}
        for t in _items(req.topics)]}


def _delete_records(req: Body, v: int, e: int) -> dict[str, Any]:
    return {"topics": [
        {"name": t.name, "partitions": [
            {"partition_index": p.partition_index, "low_watermark": -1, "error_code": e}
            for p in _items(t.partitions)]}
        for t in _items(req.topics)]}


def _describe_producers(req: Body, v: int, e: int) -> dict[str, Any]:
    return {"topics": [
        {"name": t.name, "partitions": [
            {"partition_index": i, "error_code": e, "error_message": None}
            for i in _items(t.partition_indexes)]}
        for t in _items(req.topics)]}


# ---- topics and configs --------------------------------------------------------------------
def _create_topics(req: Body, v: int, e: int) -> dict[str, Any]:
    return {"topics": [
        {"name": t.name, "error_code": e, "error_message": None,
         "num_partitions": -1, "replication_factor": -1, "configs": None}
        for t in _items(req.topics)]}


def _delete_topics(req: Body, v: int, e: int) -> dict[str, Any]:
    if v < 6:
        entries = [{"name": n, "error_code": e} for n in _items(req.topic_names)]
    else:
        entries = [{"name": t.name, "topic_id": t.topic_id, "error_code": e,
                    "error_message": None} for t in _items(req.topics)]
    return {"responses": entries}


def _create_partitions(req: Body, v: int, e: int) -> dict[str, Any]:
    return {"results": [{"name": t.name, "error_code": e, "error_message": None}
                        for t in _items(req.topics)]}


def _describe_configs(req: Body, v: int, e: int) -> dict[str, Any]:
    return {"results": [
        {"error_code": e, "error_message": None, "resource_type": r.resource_type,
         "resource_name": r.resource_name, "configs": []} for r in _items(req.resources)]}


def _alter_configs(req: Body, v: int, e: int) -> dict[str, Any]:
    return {"responses": [
        {"error_code": e, "error_message": None, "resource_type": r.resource_type,
         "resource_name": r.resource_name} for r in _items(req.resources)]}


def _describe_log_dirs(req: Body, v: int, e: int) -> dict[str, Any]:
    return {"error_code": e, "results": []}  # v1-2 have no error field: an empty answer


def _alter_replica_log_dirs(req: Body, v: int, e: int) -> dict[str, Any]:
    results: dict[str, list[int]] = {}
    for d in _items(req.dirs):
        for t in _items(d.topics):
            results.setdefault(t.name, []).extend(_items(t.partitions))
    return {"results": [
        {"topic_name": name, "partitions": [{"partition_index": p, "error_code": e}
                                            for p in parts]}
        for name, parts in results.items()]}


def _elect_leaders(req: Body, v: int, e: int) -> dict[str, Any]:
    return {"error_code": e, "replica_election_results": [
        {"topic": t.topic, "partition_result": [
            {"partition_id": p, "error_code": e, "error_message": None}
            for p in _items(t.partitions)]}
        for t in _items(req.topic_partitions)]}


def _alter_reassignments(req: Body, v: int, e: int) -> dict[str, Any]:
    return {"error_code": e, "error_message": None, "responses": [
        {"name": t.name, "partitions": [
            {"partition_index": p.partition_index, "error_code": e, "error_message": None}
            for p in _items(t.partitions)]}
        for t in _items(req.topics)]}


def _describe_topic_partitions(req: Body, v: int, e: int) -> dict[str, Any]:
    return {"topics": [{"name": t.name, "error_code": e, "is_internal": False, "partitions": []}
                       for t in _items(req.topics)], "next_cursor": None}


# ---- groups --------------------------------------------------------------------------------
def _offset_commit(req: Body, v: int, e: int) -> dict[str, Any]:
    return {"topics": [
        {"name": t.name, "partitions": [{"partition_index": p.partition_index, "error_code": e}
                                        for p in _items(t.partitions)]}
        for t in _items(req.topics)]}


def _offset_fetch(req: Body, v: int, e: int) -> dict[str, Any]:
    if v >= 8:
        return {"groups": [{"group_id": g.group_id, "topics": [], "error_code": e}
                           for g in _items(req.groups)]}
    topics = [] if v >= 2 else [
        {"name": t.name, "partitions": [
            {"partition_index": i, "committed_offset": -1, "metadata": "", "error_code": e}
            for i in _items(t.partition_indexes)]}
        for t in _items(req.topics)]
    return {"error_code": e, "topics": topics}


def _find_coordinator(req: Body, v: int, e: int) -> dict[str, Any]:
    if v < 4:
        return {"error_code": e, "error_message": None, "node_id": -1, "host": "", "port": -1}
    return {"coordinators": [
        {"key": k, "node_id": -1, "host": "", "port": -1, "error_code": e,
         "error_message": None} for k in _items(req.coordinator_keys)]}


def _join_group(req: Body, v: int, e: int) -> dict[str, Any]:
    return {"error_code": e, "generation_id": -1, "protocol_type": None, "protocol_name": None,
            "leader": "", "member_id": "", "members": []}


def _leave_group(req: Body, v: int, e: int) -> dict[str, Any]:
    return {"error_code": e}


def _sync_group(req: Body, v: int, e: int) -> dict[str, Any]:
    return {"error_code": e, "protocol_type": None, "protocol_name": None, "assignment": b""}


def _describe_groups(req: Body, v: int, e: int) -> dict[str, Any]:
    return {"groups": [{"error_code": e, "group_id": g, "group_state": "", "protocol_type": "",
                        "protocol_data": "", "members": []} for g in _items(req.groups)]}


def _list_groups(req: Body, v: int, e: int) -> dict[str, Any]:
    return {"error_code": e, "groups": []}


def _delete_groups(req: Body, v: int, e: int) -> dict[str, Any]:
    return {"results": [{"group_id": g, "error_code": e} for g in _items(req.groups_names)]}


def _offset_delete(req: Body, v: int, e: int) -> dict[str, Any]:
    return {"error_code": e, "topics": []}


def _consumer_group_heartbeat(req: Body, v: int, e: int) -> dict[str, Any]:
    return {"error_code": e, "error_message": None, "member_id": None, "member_epoch": 0,
            "heartbeat_interval": 0, "assignment": None}


def _consumer_group_describe(req: Body, v: int, e: int) -> dict[str, Any]:
    return {"groups": [{"error_code": e, "error_message": None, "group_id": g, "group_state": "",
                        "members": []} for g in _items(req.group_ids)]}


# ---- transactions --------------------------------------------------------------------------
def _init_producer_id(req: Body, v: int, e: int) -> dict[str, Any]:
    return {"error_code": e, "producer_id": -1, "producer_epoch": -1}


def _add_partitions_to_txn(req: Body, v: int, e: int) -> dict[str, Any]:
    def topics(ts: Iterable[Any]) -> list[dict[str, Any]]:
        return [{"name": t.name, "results_by_partition": [
            {"partition_index": p, "partition_error_code": e} for p in _items(t.partitions)]}
            for t in ts]

    if v < 4:
        return {"results_by_topic_v3_and_below": topics(_items(req.v3_and_below_topics))}
    # v4+ (brokers' verification batches): the top-level error only, as Kafka
    return {"error_code": e, "results_by_transaction": []}


def _txn_offset_commit(req: Body, v: int, e: int) -> dict[str, Any]:
    return _offset_commit(req, v, e)


def _write_txn_markers(req: Body, v: int, e: int) -> dict[str, Any]:
    return {"markers": [
        {"producer_id": m.producer_id, "topics": [
            {"name": t.name, "partitions": [{"partition_index": p, "error_code": e}
                                            for p in _items(t.partition_indexes)]}
            for t in _items(m.topics)]}
        for m in _items(req.markers)]}


def _describe_transactions(req: Body, v: int, e: int) -> dict[str, Any]:
    return {"transaction_states": [
        {"error_code": e, "transactional_id": t, "transaction_state": "",
         "transaction_timeout": 0, "transaction_start_time": 0, "producer_id": -1,
         "producer_epoch": -1, "topics": []} for t in _items(req.transactional_ids)]}


def _list_transactions(req: Body, v: int, e: int) -> dict[str, Any]:
    return {"error_code": e, "unknown_state_filters": [], "transaction_states": []}


# ---- security ------------------------------------------------------------------------------
def _describe_acls(req: Body, v: int, e: int) -> dict[str, Any]:
    return {"error_code": e, "error_message": None, "resources": []}


def _create_acls(req: Body, v: int, e: int) -> dict[str, Any]:
    return {"results": [{"error_code": e, "error_message": None} for _ in _items(req.creations)]}


def _delete_acls(req: Body, v: int, e: int) -> dict[str, Any]:
    return {"filter_results": [{"error_code": e, "error_message": None, "matching_acls": []}
                               for _ in _items(req.filters)]}


def _describe_client_quotas(req: Body, v: int, e: int) -> dict[str, Any]:
    return {"error_code": e, "error_message": None, "entries": None}


def _alter_client_quotas(req: Body, v: int, e: int) -> dict[str, Any]:
    return {"entries": [
        {"error_code": e, "error_message": None, "entity": [
            {"entity_type": c.entity_type, "entity_name": c.entity_name}
            for c in _items(q.entity)]}
        for q in _items(req.entries)]}


def _describe_scram(req: Body, v: int, e: int) -> dict[str, Any]:
    return {"error_code": e, "error_message": None, "results": [
        {"user": u.name, "error_code": e, "error_message": None, "credential_infos": []}
        for u in _items(req.users)]}


def _alter_scram(req: Body, v: int, e: int) -> dict[str, Any]:
    users = dict.fromkeys([u.name for u in _items(req.deletions)]
                          + [u.name for u in _items(req.upsertions)])
    return {"results": [{"user": u, "error_code": e, "error_message": None} for u in users]}


def _sasl_handshake(req: Body, v: int, e: int) -> dict[str, Any]:
    return {"error_code": e, "mechanisms": []}


def _sasl_authenticate(req: Body, v: int, e: int) -> dict[str, Any]:
    return {"error_code": e, "error_message": None, "auth_bytes": b"", "session_lifetime": 0}


# ---- cluster, quorum and node RPCs: the top-level error -----------------------------------
def _top_level(**extra: Any) -> Builder:
    def answer(req: Body, v: int, e: int) -> dict[str, Any]:
        return {"error_code": e, **extra}
    return answer


BUILDERS: dict[int, Builder] = {
    apis.PRODUCE: _produce,
    apis.FETCH: _fetch,
    apis.LIST_OFFSETS: _list_offsets,
    apis.METADATA: _metadata,
    apis.API_VERSIONS: _top_level(api_keys=()),
    apis.CREATE_TOPICS: _create_topics,
    apis.DELETE_TOPICS: _delete_topics,
    apis.DELETE_RECORDS: _delete_records,
    apis.INIT_PRODUCER_ID: _init_producer_id,
    apis.OFFSET_FOR_LEADER_EPOCH: _offset_for_leader_epoch,
    apis.DESCRIBE_CONFIGS: _describe_configs,
    apis.ALTER_CONFIGS: _alter_configs,
    apis.DESCRIBE_LOG_DIRS: _describe_log_dirs,
    apis.CREATE_PARTITIONS: _create_partitions,
    apis.INCREMENTAL_ALTER_CONFIGS: _alter_configs,
    apis.DESCRIBE_CLUSTER: _top_level(error_message=None, controller_id=-1, brokers=()),
    apis.OFFSET_COMMIT: _offset_commit,
    apis.OFFSET_FETCH: _offset_fetch,
    apis.FIND_COORDINATOR: _find_coordinator,
    apis.JOIN_GROUP: _join_group,
    apis.HEARTBEAT: _top_level(),
    apis.LEAVE_GROUP: _leave_group,
    apis.SYNC_GROUP: _sync_group,
    apis.DESCRIBE_GROUPS: _describe_groups,
    apis.LIST_GROUPS: _list_groups,
    apis.DELETE_GROUPS: _delete_groups,
    apis.OFFSET_DELETE: _offset_delete,
    apis.ADD_PARTITIONS_TO_TXN: _add_partitions_to_txn,
    apis.ADD_OFFSETS_TO_TXN: _top_level(),
    apis.END_TXN: _top_level(),
    apis.TXN_OFFSET_COMMIT: _txn_offset_commit,
    apis.WRITE_TXN_MARKERS: _write_txn_markers,
    apis.DESCRIBE_PRODUCERS: _describe_producers,
    apis.DESCRIBE_TRANSACTIONS: _describe_transactions,
    apis.LIST_TRANSACTIONS: _list_transactions,
    apis.CONSUMER_GROUP_HEARTBEAT: _consumer_group_heartbeat,
    apis.CONSUMER_GROUP_DESCRIBE: _consumer_group_describe,
    apis.ALTER_REPLICA_LOG_DIRS: _alter_replica_log_dirs,
    apis.ELECT_LEADERS: _elect_leaders,
    apis.ALTER_PARTITION_REASSIGNMENTS: _alter_reassignments,
    apis.LIST_PARTITION_REASSIGNMENTS: _top_level(error_message=None, topics=()),
    apis.DESCRIBE_QUORUM: _top_level(error_message=None, topics=()),
    apis.DESCRIBE_TOPIC_PARTITIONS: _describe_topic_partitions,
    apis.DESCRIBE_ACLS: _describe_acls,
    apis.CREATE_ACLS: _create_acls,
    apis.DELETE_ACLS: _delete_acls,
    apis.DESCRIBE_CLIENT_QUOTAS: _describe_client_quotas,
    apis.ALTER_CLIENT_QUOTAS: _alter_client_quotas,
    apis.SASL_HANDSHAKE: _sasl_handshake,
    apis.SASL_AUTHENTICATE: _sasl_authenticate,
    apis.DESCRIBE_USER_SCRAM_CREDENTIALS: _describe_scram,
    apis.ALTER_USER_SCRAM_CREDENTIALS: _alter_scram,
    # KRaft and node-to-node RPCs (CONTROLLER listener): Kafka answers their top-level error
    apis.VOTE: _top_level(topics=()),
    apis.BEGIN_QUORUM_EPOCH: _top_level(topics=()),
    apis.END_QUORUM_EPOCH: _top_level(topics=()),
    apis.FETCH_SNAPSHOT: _top_level(topics=()),
    apis.BROKER_REGISTRATION: _top_level(broker_epoch=-1),
    apis.BROKER_HEARTBEAT: _top_level(is_caught_up=False, is_fenced=True,
                                      should_shut_down=False),
    apis.ALLOCATE_PRODUCER_IDS: _top_level(producer_id_start=-1, producer_id_len=0),
    apis.ALTER_PARTITION: _top_level(topics=()),
}


def error_response(api_key: int, version: int, body: Body,
                   error_code: int = UNKNOWN_SERVER_ERROR) -> dict[str, Any] | None:
    """The response dict answering `body` with `error_code` everywhere the request names
    something; None when Kafka sends no response (acks=0 produce) and closes instead.
    KeyError for an API without one (the caller closes the connection)."""
    return BUILDERS[api_key](body, version, error_code)

"""Deleting some committed offsets of a consumer group (OffsetDelete, API 47): what
`PATCH /connectors/{name}/offsets` does for a sink partition given a null offset. The Python
client has no call for it, so Samsa's own minimal protocol client sends it."""

from __future__ import annotations

from collections import defaultdict

from confluent_kafka import TopicPartition as KafkaTP
from kio.schema.errors import ErrorCode

from samsa.cli._common import CliError
from samsa.cli._wire import COORDINATOR_GROUP, OFFSET_DELETE, WireClient, error_name

from ..errors import ConnectException


def delete_group_offsets(bootstrap: str, group: str, partitions: list[KafkaTP]) -> None:
    by_topic: dict[str, list[int]] = defaultdict(list)
    for tp in partitions:
        by_topic[tp.topic].append(tp.partition)
    body = {"group_id": group,
            "topics": [{"name": t, "partitions": [{"partition_index": p} for p in sorted(ps)]}
                       for t, ps in sorted(by_topic.items())]}
    try:
        with WireClient(bootstrap.split(",")[0], client_id="samsa-connect") as client:
            node = client.coordinator(COORDINATOR_GROUP, group)
            resp = client.call(OFFSET_DELETE, body, node=node)
    except CliError as e:
        raise ConnectException(f"Failed to delete offsets of group {group}: {e}") from None
    if resp.error_code not in (ErrorCode.none, ErrorCode.group_id_not_found):
        raise ConnectException(f"Failed to delete offsets of group {group}: "
                               f"{error_name(resp.error_code)}")
    for t in resp.topics:
        for p in t.partitions:
            if p.error_code != ErrorCode.none:
                raise ConnectException(f"Failed to delete the offset of {t.name}-"
                                       f"{p.partition_index} in group {group}: "
                                       f"{error_name(p.error_code)}")

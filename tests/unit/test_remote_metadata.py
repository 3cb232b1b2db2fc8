"""The remote log metadata state (KIP-405 segment states) and the local-directory store."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest

from samsa.config import ConfigError
from samsa.storage.remote.config import validate_topic
from samsa.storage.remote.local_store import (
    LocalDirectoryRemoteStorageManager,
    parse_partition_dir,
    partition_dir_name,
)
from samsa.storage.remote.metadata import (
    RemoteLogMetadataCache,
    decode_event,
    encode_event,
    metadata_partition,
)
from samsa.storage.remote.rsm import (
    IndexType,
    LogSegmentData,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    RemoteResourceNotFound,
    RemoteStorageManager,
    TopicIdPartition,
    create_rsm,
)
from samsa.storage.remote.rsm import RemoteLogSegmentState as S

TP = TopicIdPartition(uuid.UUID(int=7), "my-topic-1", 3)


def seg(start: int, end: int, max_ts: int = 0, size: int = 100, epochs=((0, 0),),
        txn: bool = False) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(RemoteLogSegmentId(TP, uuid.uuid4()), start, end, max_ts, 1,
                                    0, size, tuple(epochs), S.COPY_SEGMENT_STARTED, None, txn)


def upd(m: RemoteLogSegmentMetadata, state: S) -> RemoteLogSegmentMetadataUpdate:
    return RemoteLogSegmentMetadataUpdate(m.segment_id, 1, state, 1)


def test_only_finished_segments_are_readable() -> None:
    c = RemoteLogMetadataCache()
    a, b = seg(0, 9, 100), seg(10, 19, 200)
    c.apply(a)
    c.apply(b)
    assert c.segments(TP) == [] and c.segment_for_offset(TP, 5) is None
    assert c.remote_log_start_offset(TP) == -1 and c.highest_offset(TP) == -1
    c.apply(upd(b, S.COPY_SEGMENT_FINISHED))
    assert [m.start_offset for m in c.segments(TP)] == [10]
    assert c.segment_for_offset(TP, 5).start_offset == 10  # type: ignore[union-attr]
    c.apply(upd(a, S.COPY_SEGMENT_FINISHED))
    assert c.segment_for_offset(TP, 5).start_offset == 0  # type: ignore[union-attr]
    assert c.segment_for_offset(TP, 19).start_offset == 10  # type: ignore[union-attr]
    assert c.segment_for_offset(TP, 20) is None
    assert (c.remote_log_start_offset(TP), c.highest_offset(TP), c.remote_log_end_offset(TP)) \
        == (0, 19, 20)
    assert c.remote_log_size(TP) == 200
    assert c.segment_for_timestamp(TP, 150).start_offset == 10  # type: ignore[union-attr]
    assert c.segment_for_timestamp(TP, 201) is None
    # deleting: invisible from DELETE_SEGMENT_STARTED, forgotten at DELETE_SEGMENT_FINISHED
    c.apply(upd(a, S.DELETE_SEGMENT_STARTED))
    assert c.remote_log_start_offset(TP) == 10
    assert [m.state for m in c.list_remote_log_segments(TP)] == [S.DELETE_SEGMENT_STARTED,
                                                                 S.COPY_SEGMENT_FINISHED]
    c.apply(upd(a, S.DELETE_SEGMENT_FINISHED))
    assert a.id not in c.known_ids() and b.id in c.known_ids()


def test_invalid_transitions_and_replays_change_nothing() -> None:
    c = RemoteLogMetadataCache()
    a = seg(0, 9)
    assert c.apply(a) and not c.apply(a)
    assert not c.apply(upd(a, S.DELETE_SEGMENT_FINISHED))  # must pass DELETE_SEGMENT_STARTED
    assert c.apply(upd(a, S.COPY_SEGMENT_FINISHED))
    assert not c.apply(upd(a, S.COPY_SEGMENT_FINISHED))
    assert not c.apply(upd(seg(5, 6), S.COPY_SEGMENT_FINISHED))  # unknown segment
    # a replay of the whole history in order gives the same state
    events = [a, upd(a, S.COPY_SEGMENT_FINISHED)]
    c2 = RemoteLogMetadataCache()
    for ev in events + events:
        c2.apply(decode_event(encode_event(ev)[1]))  # type: ignore[arg-type]
    assert c2.segments(TP) == c.segments(TP)


def test_partition_delete_states() -> None:
    c = RemoteLogMetadataCache()
    a = seg(0, 9)
    c.apply(a)
    for st in RemotePartitionDeleteState:
        assert c.apply(RemotePartitionDeleteMetadata(TP, st, 0, 1))
        assert not c.apply(RemotePartitionDeleteMetadata(TP, st, 0, 1))
    assert TP not in c.topic_partitions() and not c.known_ids()


def test_epoch_and_txn_queries() -> None:
    c = RemoteLogMetadataCache()
    a = seg(0, 9, epochs=((0, 0), (1, 5)))
    b = seg(10, 19, epochs=((1, 10), (3, 15)), txn=True)
    for m in (a, b):
        c.apply(m)
        c.apply(upd(m, S.COPY_SEGMENT_FINISHED))
    assert c.highest_offset_for_epoch(TP, 0) == 4
    assert c.highest_offset_for_epoch(TP, 1) == 14
    assert c.highest_offset_for_epoch(TP, 3) == 19
    assert c.highest_offset_for_epoch(TP, 2) == -1
    assert c.remote_log_segment_metadata(TP, 1, 12).id == b.id  # type: ignore[union-attr]
    assert c.remote_log_segment_metadata(TP, 0, 12) is None
    assert c.next_segment_with_txn_index(TP, 0).id == b.id  # type: ignore[union-attr]
    assert [m.id for m in c.list_remote_log_segments(TP, 3)] == [b.id]


def test_event_encoding_round_trip() -> None:
    a = seg(5, 9, 123, epochs=((2, 5),), txn=True)
    for ev in (a, upd(a, S.COPY_SEGMENT_FINISHED),
               RemotePartitionDeleteMetadata(TP, RemotePartitionDeleteState.DELETE_PARTITION_MARKED,
                                             4, 2)):
        key, value = encode_event(ev)
        assert key == str(TP).encode()
        assert decode_event(value) == ev
    assert decode_event(b"{not json") is None
    assert 0 <= metadata_partition(TP, 50) < 50
    assert metadata_partition(TP, 50) == metadata_partition(TP, 50)


def _data(tmp: Path, log: bytes) -> LogSegmentData:
    p = tmp / "seg.log"
    p.write_bytes(log)
    return LogSegmentData(p, b"\x00" * 8, b"\x01" * 12, None, b"{}", b"0\n1\n0 0\n")


def test_local_store_copy_fetch_list_delete(tmp_path: Path) -> None:
    rsm = create_rsm("local", {"rsm.config.dir": str(tmp_path / "store")})
    assert isinstance(rsm, LocalDirectoryRemoteStorageManager)
    assert isinstance(rsm, RemoteStorageManager)
    m = seg(100, 199)
    body = bytes(range(256)) * 40
    rsm.copy_log_segment_data(m, _data(tmp_path, body))
    assert rsm.fetch_log_segment(m, 0) == body
    assert rsm.fetch_log_segment(m, 10, 19) == body[10:20]  # end inclusive, as Kafka
    assert rsm.fetch_log_segment(m, len(body) - 5, len(body) + 100) == body[-5:]
    assert rsm.fetch_index(m, IndexType.OFFSET) == b"\x00" * 8
    assert rsm.fetch_index(m, IndexType.LEADER_EPOCH) == b"0\n1\n0 0\n"
    with pytest.raises(RemoteResourceNotFound):
        rsm.fetch_index(m, IndexType.TRANSACTION)  # none was copied
    listed = list(rsm.list_segments())
    assert [o.segment_id for o in listed] == [m.segment_id]
    assert listed[0].size == len(body) + 8 + 12 + 2 + 8
    assert not any(".tmp-" in f for f in listed[0].files)
    rsm.delete_log_segment_data(m)
    rsm.delete_log_segment_data(m)  # idempotent
    assert list(rsm.list_segments()) == []
    with pytest.raises(RemoteResourceNotFound):
        rsm.fetch_log_segment(m, 0)


def test_local_store_delete_removes_a_half_copy(tmp_path: Path) -> None:
    rsm = create_rsm("local", {"rsm.config.dir": str(tmp_path)})
    m = seg(0, 1)
    d = tmp_path / partition_dir_name(TP)
    d.mkdir()
    half = d / f"{0:020d}-{m.id.hex}.log.tmp-12345678"
    half.write_bytes(b"x" * 10)
    old = time.time() - 3600
    os.utime(half, (old, old))
    (listed,) = rsm.list_segments(TP)
    assert listed.segment_id.id == m.id and listed.modified_ms <= (old + 1) * 1000
    rsm.delete_log_segment_data(m)
    assert not half.exists()


def test_partition_dir_names() -> None:
    assert parse_partition_dir(partition_dir_name(TP)) == TP
    assert parse_partition_dir("junk") is None
    assert parse_partition_dir("t-x-" + str(uuid.uuid4())) is None


def test_backend_selection() -> None:
    with pytest.raises(ValueError, match="cannot load"):
        create_rsm("no.such.Module", {})
    with pytest.raises(ValueError, match="cannot load"):
        create_rsm("nodots", {})


@pytest.mark.parametrize(("configs", "existing", "message"), [
    ({"remote.storage.enable": "true", "cleanup.policy": "compact"}, {},
     "only supports topics with cleanup.policy=delete"),
    ({"remote.storage.enable": "true", "retention.bytes": "100", "local.retention.bytes": "200"},
     {}, "Value must not be more than retention.bytes property value: 100"),
    ({"remote.storage.enable": "true", "retention.ms": "1000", "local.retention.ms": "-1"}, {},
     "Value must not be -1 as retention.ms value is set as 1000"),
    ({"remote.storage.enable": "true", "remote.log.copy.disable": "true",
      "local.retention.ms": "10"}, {}, "must be set to the identical value"),
    ({"remote.storage.enable": "false"}, {"remote.storage.enable": "true"},
     "invalid to disable remote storage without deleting remote data"),
])
def test_topic_config_checks(configs: dict[str, str], existing: dict[str, str],
                             message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        validate_topic(configs, existing, True)


def test_topic_config_checks_accept() -> None:
    validate_topic({"remote.storage.enable": "true", "cleanup.policy": ""}, {}, True)
    validate_topic({"remote.storage.enable": "true", "retention.bytes": "-1",
                    "local.retention.bytes": "-1"}, {}, True)
    validate_topic({"remote.storage.enable": "false", "remote.log.delete.on.disable": "true"},
                   {"remote.storage.enable": "true"}, True)
    validate_topic({"remote.storage.enable": "true", "remote.log.copy.disable": "true",
                    "local.retention.ms": "-2"}, {}, True)

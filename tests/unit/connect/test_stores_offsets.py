"""Source offsets: Kafka Connect's key/value bytes, murmur2 placement, the reader, the writer's
snapshot/flush/cancel semantics, and the file store (durable across a kill -9 mid-write)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from samsa.connect.errors import ConnectException, DataException
from samsa.connect.runtime.stores import codec, javaser
from samsa.connect.runtime.stores.offset_store import (
    FileOffsetBackingStore,
    MemoryOffsetBackingStore,
    OffsetCallback,
    OffsetStorageReaderImpl,
    OffsetStorageWriter,
    connector_offsets,
    offset_key,
    parse_offset_key,
    partition_key,
    reset_offsets,
    write_offsets,
)

ROOT = Path(__file__).resolve().parents[3]


def test_key_and_value_bytes_are_kafka_connects() -> None:
    assert offset_key("file-source", {"filename": "/tmp/in.txt"}) == \
        b'["file-source",{"filename":"/tmp/in.txt"}]'
    assert codec.dumps({"position": 1234}) == b'{"position":1234}'
    assert parse_offset_key(b'["c",{"p":1}]') == ("c", {"p": 1})
    for bad in (b'["c"]', b'{"c":1}', b"[1,{}]", b'["c",[]]', b"nope", None):
        assert parse_offset_key(bad) is None


@pytest.mark.parametrize(("data", "expected"), [
    (b"21", -973932308), (b"foobar", -790332482), (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971), (b"abc", 479470107)])
def test_murmur2_matches_kafkas_test_vectors(data: bytes, expected: int) -> None:
    assert codec.murmur2(data) == expected


def test_default_partition_is_positive_murmur2_modulo() -> None:
    assert codec.default_partition(b"foobar", 25) == (-790332482 & 0x7FFFFFFF) % 25
    assert all(0 <= codec.default_partition(bytes([i]), 7) < 7 for i in range(256))


def test_reader_finds_offsets_whatever_the_key_order() -> None:
    store = MemoryOffsetBackingStore()
    store.set({offset_key("c", {"a": 1, "b": "x"}): b'{"pos":5}',
               offset_key("other", {"a": 1, "b": "x"}): b'{"pos":99}'}).result(1)
    reader = OffsetStorageReaderImpl(store, "c")
    assert reader.offset({"b": "x", "a": 1}) == {"pos": 5}
    assert reader.offset({"a": 2}) is None
    got = reader.offsets([{"a": 1, "b": "x"}, {"a": 3}])
    assert got == {partition_key({"a": 1, "b": "x"}): {"pos": 5}, partition_key({"a": 3}): None}
    with pytest.raises(DataException):
        reader.offset({"nested": {"no": 1}})
    reader.close()
    with pytest.raises(ConnectException):
        reader.offset({"a": 1})


def test_a_rewrite_reuses_the_stored_key_spelling() -> None:
    store = MemoryOffsetBackingStore()
    store.set({b'["c",{"b":1,"a":2}]': b'{"o":1}'}).result(1)
    write_offsets(store, "c", [({"a": 2, "b": 1}, {"o": 2})])
    assert list(v for v in store._data.values()) == [(b'["c",{"b":1,"a":2}]', b'{"o":2}')]


def test_writer_flush_and_cancel_semantics() -> None:
    store = MemoryOffsetBackingStore()
    w = OffsetStorageWriter(store, "c")
    assert w.begin_flush() is False  # nothing buffered
    w.offset({"p": 0}, {"o": 1})
    w.offset({"p": 1}, {"o": 10})
    assert w.begin_flush() is True
    w.offset({"p": 0}, {"o": 2})  # recorded during the flush: buffered for the next one
    with pytest.raises(ConnectException):
        w.begin_flush()
    w.cancel_flush()  # the snapshot comes back, under the newer offset
    assert w.begin_flush() is True
    fut = w.do_flush()
    assert fut is not None
    fut.result(1)
    reader = OffsetStorageReaderImpl(store, "c")
    assert reader.offset({"p": 0}) == {"o": 2}
    assert reader.offset({"p": 1}) == {"o": 10}
    assert w.begin_flush() is False
    assert w.will_flush() is False


def test_a_failed_write_puts_the_snapshot_back(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    store = FileOffsetBackingStore(blocker / "offsets.json")  # its directory cannot exist
    w = OffsetStorageWriter(store, "c")
    w.offset({"p": 0}, {"o": 1})
    assert w.begin_flush()
    errors: list[BaseException | None] = []
    fut = w.do_flush(errors.append)
    assert fut is not None
    with pytest.raises(OSError):
        fut.result(1)
    assert len(errors) == 1 and isinstance(errors[0], OSError)
    w.offset({"p": 1}, {"o": 7})
    assert w.begin_flush()  # the failed snapshot is pending again, with the newer offset
    assert {p["p"] for p, _ in w._to_flush.values()} == {0, 1}  # type: ignore[union-attr]


def test_an_unserializable_offset_fails_the_flush_and_is_kept() -> None:
    w = OffsetStorageWriter(MemoryOffsetBackingStore(), "c")
    w.offset({"p": 0}, {"o": [1, 2]})
    assert w.begin_flush()
    errors: list[BaseException | None] = []
    assert w.do_flush(errors.append) is None
    assert isinstance(errors[0], DataException)


class DeferredStore(MemoryOffsetBackingStore):
    """Completes writes when the test says so, to order a late answer after a cancel."""

    def __init__(self) -> None:
        super().__init__()
        self.pending: list[tuple[dict[bytes, bytes | None], OffsetCallback | None]] = []

    def set(self, values: dict[bytes, bytes | None],
            callback: OffsetCallback | None = None) -> Future[None]:
        self.pending.append((values, callback))
        return Future()

    def complete(self, i: int) -> None:
        values, cb = self.pending[i]
        super().set(values, cb)


def test_a_cancelled_flushs_late_answer_is_ignored() -> None:
    store = DeferredStore()
    w = OffsetStorageWriter(store, "c")
    seen: list[BaseException | None] = []
    w.offset({"p": 0}, {"o": 1})
    assert w.begin_flush()
    w.do_flush(seen.append)
    w.cancel_flush()  # timed out, say
    assert w.begin_flush()
    w.do_flush(seen.append)
    store.complete(0)  # the first flush's answer arrives late
    assert seen == []
    assert w.will_flush()  # still flushing the second snapshot
    store.complete(1)
    assert seen == [None]
    assert not w.will_flush()


def test_tombstones_reset_and_listing() -> None:
    store = MemoryOffsetBackingStore()
    write_offsets(store, "c", [({"f": "a"}, {"pos": 1}), ({"f": "b"}, {"pos": 2})])
    write_offsets(store, "d", [({"f": "a"}, {"pos": 9})])
    assert sorted(connector_offsets(store, "c"), key=lambda e: e["partition"]["f"]) == [
        {"partition": {"f": "a"}, "offset": {"pos": 1}},
        {"partition": {"f": "b"}, "offset": {"pos": 2}}]
    write_offsets(store, "c", [({"f": "a"}, None)])
    assert connector_offsets(store, "c") == [{"partition": {"f": "b"}, "offset": {"pos": 2}}]
    assert reset_offsets(store, "c") == 1
    assert connector_offsets(store, "c") == []
    assert connector_offsets(store, "d") == [{"partition": {"f": "a"}, "offset": {"pos": 9}}]


def test_file_store_survives_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "connect.offsets"
    s1 = FileOffsetBackingStore(path)
    s1.start()
    write_offsets(s1, "c", [({"f": "a"}, {"pos": 1}), ({"f": "b"}, {"pos": 2})])
    write_offsets(s1, "c", [({"f": "b"}, None)])
    s1.stop()
    s2 = FileOffsetBackingStore(path)
    s2.start()
    assert connector_offsets(s2, "c") == [{"partition": {"f": "a"}, "offset": {"pos": 1}}]
    assert not list(tmp_path.glob("*.tmp"))


def test_file_store_refuses_a_corrupt_file(tmp_path: Path) -> None:
    path = tmp_path / "connect.offsets"
    path.write_text("{garbage")
    with pytest.raises(ConnectException):
        FileOffsetBackingStore(path).start()
    good = javaser.dump_byte_map([(b'["c",{"f":"a"}]', b'{"pos":1}')])
    path.write_bytes(good[:-5])  # truncated
    with pytest.raises(ConnectException):
        FileOffsetBackingStore(path).start()
    path.write_bytes(b"")  # Kafka reads an empty file as no offsets
    s = FileOffsetBackingStore(path)
    s.start()
    assert s.connector_partitions("c") == []


def test_java_serialized_map_round_trip() -> None:
    entries: list[tuple[bytes | None, bytes | None]] = [
        (f'["c",{{"f":"{i}"}}]'.encode(), b'{"pos":%d}' % i) for i in range(30)]
    entries.append((b'["c",{"f":"null"}]', None))
    assert javaser.load_byte_map(javaser.dump_byte_map(entries)) == entries
    assert javaser.load_byte_map(javaser.dump_byte_map([])) == []


JAVA = shutil.which("java")


def run_java(*args: str) -> str:
    assert JAVA is not None
    src = Path(__file__).parent / "java" / "OffsetsFile.java"
    return subprocess.run([JAVA, str(src), *args], capture_output=True, text=True, check=True,
                          timeout=120).stdout


@pytest.mark.skipif(JAVA is None, reason="no JVM")
def test_the_file_is_kafka_connects_java_serialized_map(tmp_path: Path) -> None:
    """The JVM reads Samsa's file and Samsa reads the JVM's, as FileOffsetBackingStore does."""
    ours = tmp_path / "samsa.offsets"
    store = FileOffsetBackingStore(ours)
    store.start()
    write_offsets(store, "file-src", [({"filename": "/tmp/a.txt"}, {"position": 42}),
                                      ({"filename": "/tmp/b.txt"}, {"position": 7})])
    assert run_java("read", str(ours)).splitlines() == [
        '["file-src",{"filename":"/tmp/a.txt"}]\t{"position":42}',
        '["file-src",{"filename":"/tmp/b.txt"}]\t{"position":7}']

    theirs = tmp_path / "kafka.offsets"
    key, value = '["file-src",{"filename":"/tmp/c.txt"}]', '{"position":1234}'
    run_java("write", str(theirs), key, value, '["other",{"p":1}]', '{"o":2}')
    store = FileOffsetBackingStore(theirs)
    store.start()
    assert OffsetStorageReaderImpl(store, "file-src").offset({"filename": "/tmp/c.txt"}) == \
        {"position": 1234}
    assert store.connector_partitions("other") == [{"p": 1}]
    # one entry: the JVM's bytes and ours are the same
    run_java("write", str(theirs), key, value)
    assert theirs.read_bytes() == javaser.dump_byte_map([(key.encode(), value.encode())])


CHILD = textwrap.dedent("""
    import sys
    from samsa.connect.runtime.stores.offset_store import FileOffsetBackingStore, write_offsets
    store = FileOffsetBackingStore(sys.argv[1])
    store.start()
    for i in range(1, 1_000_000):
        write_offsets(store, "c", [({"f": "a"}, {"pos": i, "pad": "x" * 4000})])
        print(i, flush=True)
""")


def test_file_store_is_whole_after_kill_9_mid_write(tmp_path: Path) -> None:
    path = tmp_path / "connect.offsets"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(path)], stdout=subprocess.PIPE,
                            env=env, text=True)
    acked = 0
    deadline = time.monotonic() + 60
    try:
        assert proc.stdout is not None
        while acked < 40 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            acked = int(line)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    assert acked >= 40, "the child wrote too few offsets"
    javaser.load_byte_map(path.read_bytes())  # never torn
    store = FileOffsetBackingStore(path)
    store.start()
    got: Any = OffsetStorageReaderImpl(store, "c").offset({"f": "a"})
    assert got is not None and got["pos"] >= acked  # everything acknowledged is there

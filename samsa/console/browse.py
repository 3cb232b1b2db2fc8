"""The message browser: bounded reads of a topic from a chosen place, with an optional search,
and the live tail. Reads assign partitions at explicit offsets (no group join, no commits) and
stop at the end offsets seen when the read began, at the page size, after MAX_SCAN records or
after READ_BUDGET_S, whichever comes first — so a topic with millions of records costs one page."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from confluent_kafka import OFFSET_END, Consumer, KafkaError, KafkaException, TopicPartition

from .cluster import TP, Cluster, ConsoleError, describe, parse_time
from .codec import Codec, Shown, plain

MAX_LIMIT = 500
MAX_SCAN = 50_000  # records examined by one search page at most
READ_BUDGET_S = 5.0
MODES = ("beginning", "newest", "offset", "timestamp")


@dataclass
class Query:
    topic: str
    mode: str = "newest"
    value: str = ""  # the offset or time for modes offset/timestamp
    partition: int | None = None
    search: str = ""
    limit: int = 50
    positions: dict[int, int] | None = None  # continue a previous page from here

    @staticmethod
    def parse(topic: str, params: Any) -> Query:
        mode = params.get("mode") or "newest"
        if mode not in MODES:
            raise ConsoleError(f"unknown start {mode!r} (choose from {', '.join(MODES)})")
        part_text = (params.get("partition") or "").strip()
        partition = None
        if part_text not in ("", "all"):
            partition = _int(part_text, "partition")
        limit = _int(params.get("limit") or "50", "limit")
        if not 1 <= limit <= MAX_LIMIT:
            raise ConsoleError(f"limit must be between 1 and {MAX_LIMIT}")
        positions = None
        if params.get("positions"):
            positions = {}
            for item in str(params["positions"]).split(","):
                p, sep, o = item.partition(":")
                if not sep:
                    raise ConsoleError(f"bad positions {params['positions']!r}")
                positions[_int(p, "partition")] = _int(o, "offset")
        return Query(topic, mode, (params.get("value") or "").strip(), partition,
                     (params.get("search") or "").strip(), limit, positions)


@dataclass
class Page:
    records: list[dict[str, Any]] = field(default_factory=list)
    next_positions: dict[int, int] = field(default_factory=dict)
    scanned: int = 0
    notes: list[str] = field(default_factory=list)
    exhausted: bool = False  # every partition read to its end


def _int(text: str, what: str) -> int:
    try:
        n = int(str(text).strip())
    except ValueError:
        raise ConsoleError(f"{what} must be a whole number, got {str(text)[:40]!r}") from None
    if not -(2**63) <= n < 2**63:
        raise ConsoleError(f"{what} {n} is out of range (a 64-bit offset)")
    return n


def consumer(cluster: Cluster, **extra: Any) -> Consumer:
    conf = {k: v for k, v in cluster.config.items() if k != "client.id"}
    conf.update({"group.id": "samsa-console-browser", "enable.auto.commit": False,
                 "enable.auto.offset.store": False, "enable.partition.eof": True,
                 "client.id": "samsa-console-browser", "fetch.wait.max.ms": 100,
                 "auto.offset.reset": "latest", **extra})
    try:
        return Consumer(conf)
    except KafkaException as e:
        raise ConsoleError(f"bad client configuration: {describe(e)}", 500) from None


def record(msg: Any, codec: Codec) -> dict[str, Any]:
    ts_type, ts = msg.timestamp()
    key: bytes | None = msg.key()
    value: bytes | None = msg.value()
    headers = [(str(k), plain(v if v is None or isinstance(v, bytes) else str(v).encode()).text)
               for k, v in (msg.headers() or [])]
    when = datetime.fromtimestamp(ts / 1000, UTC).isoformat(timespec="milliseconds") if ts > 0 else ""
    return {"partition": msg.partition(), "offset": msg.offset(), "timestamp": ts, "time": when,
            "key": codec.decode(key).as_dict(), "value": codec.decode(value).as_dict(),
            "headers": headers, "size": len(value or b"") + len(key or b"")}


def _matches(msg: Any, needle: bytes, codec: Codec) -> bool:
    k, v = msg.key() or b"", msg.value() or b""
    if needle in k.lower() or needle in v.lower():
        return True
    for hk, hv in msg.headers() or []:
        if needle in str(hk).lower().encode() or (isinstance(hv, bytes) and needle in hv.lower()):
            return True
    if v[:1] == b"\x00":  # framed: the decoded text may match where the raw bytes do not
        shown: Shown = codec.decode(v)
        return needle.decode("utf-8", "replace") in shown.text.lower()
    return False


def starts(cluster: Cluster, q: Query) -> tuple[dict[TP, int], dict[TP, int], list[str]]:
    """Where each partition's read begins and the end offset it stops at."""
    tm = cluster.topic(q.topic)
    parts = sorted(tm.partitions)
    if q.partition is not None:
        if q.partition not in tm.partitions:
            raise ConsoleError(f"topic {q.topic!r} has no partition {q.partition} "
                               f"(it has {len(parts)}: 0..{len(parts) - 1})", 404)
        parts = [q.partition]
    tps = [(q.topic, p) for p in parts]
    lo, hi = cluster.earliest(tps), cluster.latest(tps)
    notes: list[str] = []
    if q.positions is not None:
        begin = {(q.topic, p): o for p, o in q.positions.items() if (q.topic, p) in hi}
    elif q.mode == "beginning":
        begin = dict(lo)
    elif q.mode == "newest":
        share = max(1, -(-q.limit // max(1, len(tps))))
        begin = {tp: max(lo.get(tp, 0), hi[tp] - share) for tp in hi}
    elif q.mode == "offset":
        n = _int(q.value or "0", "offset")
        begin = {tp: n for tp in hi}
    else:
        found = cluster.for_time(tps, parse_time(q.value or "0"))
        begin = {tp: found[tp] if found.get(tp, -1) >= 0 else hi[tp] for tp in hi}
    for tp, o in list(begin.items()):
        first, end = lo.get(tp, 0), hi.get(tp, 0)
        if o > end:
            notes.append(f"partition {tp[1]}: offset {o} is past the end ({end}); nothing to show there")
            begin[tp] = end
        elif o < first:
            if q.mode == "offset" and q.positions is None:
                notes.append(f"partition {tp[1]}: offset {o} is before the log start ({first}); "
                             f"reading from {first}")
            begin[tp] = first
    return begin, hi, notes


def read_page(cluster: Cluster, codec: Codec, q: Query) -> Page:
    begin, ends, notes = starts(cluster, q)
    page = Page(notes=notes, next_positions={tp[1]: o for tp, o in begin.items()})
    todo = {tp for tp, o in begin.items() if o < ends[tp]}
    if not todo:
        page.exhausted = True
        return page
    c = consumer(cluster)
    needle = q.search.lower().encode()
    try:
        c.assign([TopicPartition(t, p, begin[(t, p)]) for t, p in sorted(todo)])
        deadline = time.monotonic() + READ_BUDGET_S
        while todo and len(page.records) < q.limit and page.scanned < MAX_SCAN \
                and time.monotonic() < deadline:
            for msg in c.consume(500, 0.05):
                err = msg.error()
                tp = (msg.topic(), msg.partition())
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        todo.discard(tp)
                        continue
                    raise ConsoleError(f"reading {q.topic}: {err.str()}", 502)
                if tp not in todo or len(page.records) >= q.limit:
                    continue
                off = int(msg.offset() or 0)
                page.next_positions[tp[1]] = off + 1
                if off + 1 >= ends[tp]:
                    todo.discard(tp)
                page.scanned += 1
                if needle and not _matches(msg, needle, codec):
                    continue
                page.records.append(record(msg, codec))
        page.exhausted = not todo
        if todo and time.monotonic() >= deadline:
            page.notes.append(f"stopped after {READ_BUDGET_S:.0f} s ({page.scanned} records examined)")
        elif page.scanned >= MAX_SCAN and len(page.records) < q.limit:
            page.notes.append(f"stopped after examining {MAX_SCAN} records; go on from the next page")
    finally:
        c.close()
    page.records.sort(key=lambda r: (r["timestamp"], r["partition"], r["offset"]),
                      reverse=q.mode == "newest" and q.positions is None)
    return page


TAIL_TICK_S = 1.0
TAIL_MAX_PER_TICK = 50
# a live row shows the start of a long key or value (the browser lays out every row it is sent;
# the record's page shows all of it)
TAIL_TEXT_MAX = 512
# the tail's consumer prefetches little: what a page cannot show is skipped, not fetched
TAIL_CONSUMER = {"queued.max.messages.kbytes": 256, "fetch.max.bytes": 256 << 10,
                 "message.max.bytes": 256 << 10,  # librdkafka wants fetch.max.bytes >= it
                 "max.partition.fetch.bytes": 64 << 10}


def tail(cluster: Cluster, codec: Codec, topic: str, partition: int | None,
         search: str = "") -> Iterator[tuple[list[dict[str, Any]], int]]:
    """(new records, records skipped) every TAIL_TICK_S; an empty batch each idle tick, so the
    caller notices a gone client. At most TAIL_MAX_PER_TICK records a tick are decoded: when the
    topic runs faster than that, the tail jumps to the end and says how many it skipped, so a
    browser tailing a busy topic costs the cluster a bounded amount of work. The consumer closes
    when the generator is closed."""
    tm = cluster.topic(topic)
    parts = sorted(tm.partitions) if partition is None else [partition]
    if partition is not None and partition not in tm.partitions:
        raise ConsoleError(f"topic {topic!r} has no partition {partition}", 404)
    c = consumer(cluster, **TAIL_CONSUMER)
    needle = search.lower().encode()
    try:
        # explicit end offsets (not OFFSET_END, resolved later): a record produced once the
        # stream has started is always shown
        ends = cluster.latest([(topic, p) for p in parts])
        c.assign([TopicPartition(topic, p, ends.get((topic, p), OFFSET_END)) for p in parts])
        while True:
            started = time.monotonic()
            msgs = c.consume(TAIL_MAX_PER_TICK, TAIL_TICK_S)
            batch = [_clipped(record(m, codec)) for m in msgs if m.error() is None
                     and (not needle or _matches(m, needle, codec))]
            skipped = _skip_ahead(c) if len(msgs) >= TAIL_MAX_PER_TICK else 0
            yield batch, skipped
            rest = TAIL_TICK_S - (time.monotonic() - started)
            if rest > 0:
                time.sleep(rest)
    finally:
        c.close()


def _clipped(rec: dict[str, Any]) -> dict[str, Any]:
    """A tailed record with its key and value text cut to TAIL_TEXT_MAX characters, saying so."""
    for part in ("key", "value"):
        shown = rec[part]
        text = shown.get("text") or ""
        if len(text) > TAIL_TEXT_MAX:
            more = f"{len(text) - TAIL_TEXT_MAX} more characters not shown live"
            note = shown.get("note")
            rec[part] = {**shown, "text": text[:TAIL_TEXT_MAX] + "…",
                         "note": f"{note}; {more}" if note else more}
    return rec


def _skip_ahead(c: Consumer) -> int:
    """Seek partitions far behind their end to the end; the number of records jumped over."""
    skipped = 0
    for tp in c.position(c.assignment()):
        try:
            _, high = c.get_watermark_offsets(tp, cached=True)
        except KafkaException:
            continue
        if tp.offset >= 0 and high - tp.offset > TAIL_MAX_PER_TICK:
            skipped += high - tp.offset
            c.seek(TopicPartition(tp.topic, tp.partition, high))
    return skipped

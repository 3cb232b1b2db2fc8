"""A consumer-group member run as its own process by the group tests (so it can be kill -9'd).

    python group_member.py CLIENT BOOTSTRAP GROUP TOPIC OUTFILE [key=value ...]

Writes one line per event to OUTFILE: `msg PARTITION OFFSET`, `assign P,P,...`, `revoke P,...`,
or `set P,...` (the whole current assignment, for KIP-848 members polled without callbacks).
Commits synchronously after processing each message batch (at-least-once).
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time


def out(f, line: str) -> None:  # type: ignore[no-untyped-def]
    f.write(line + "\n")
    f.flush()


def run_confluent(bs: str, group: str, topic: str, f, extra: dict[str, str]) -> None:  # type: ignore[no-untyped-def]
    from confluent_kafka import Consumer

    conf: dict[str, object] = {"bootstrap.servers": bs, "group.id": group,
                               "auto.offset.reset": "earliest", "enable.auto.commit": False,
                               "session.timeout.ms": 6000, "heartbeat.interval.ms": 500, **extra}
    if conf.get("group.protocol") == "consumer":  # the broker owns these with KIP-848
        conf.pop("session.timeout.ms")
        conf.pop("heartbeat.interval.ms")
    c = Consumer(conf)

    def on_assign(consumer, parts):  # type: ignore[no-untyped-def]
        out(f, "assign " + ",".join(str(p.partition) for p in parts))
        if conf.get("partition.assignment.strategy") == "cooperative-sticky":
            consumer.incremental_assign(parts)

    def on_revoke(consumer, parts):  # type: ignore[no-untyped-def]
        out(f, "revoke " + ",".join(str(p.partition) for p in parts))
        if conf.get("partition.assignment.strategy") == "cooperative-sticky":
            consumer.incremental_unassign(parts)

    if conf.get("group.protocol") == "consumer":
        c.subscribe([topic])
    else:
        c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    last_assign = None
    try:
        _confluent_loop(c, conf, f, last_assign)
    finally:
        c.close()


def _confluent_loop(c, conf, f, last_assign) -> None:  # type: ignore[no-untyped-def]
    while True:
        msgs = c.consume(100, 0.2)
        if conf.get("group.protocol") == "consumer":
            now = sorted(p.partition for p in c.assignment())
            if now != last_assign:
                out(f, "set " + ",".join(map(str, now)))
                last_assign = now
        for m in msgs:
            if m.error() is None:
                out(f, f"msg {m.partition()} {m.offset()}")
        if msgs:
            c.commit(asynchronous=False)


def run_kafka_python(bs: str, group: str, topic: str, f, extra: dict[str, str]) -> None:  # type: ignore[no-untyped-def]
    from kafka import ConsumerRebalanceListener, KafkaConsumer

    class L(ConsumerRebalanceListener):
        def on_partitions_assigned(self, assigned):  # type: ignore[no-untyped-def]
            out(f, "assign " + ",".join(str(p.partition) for p in assigned))

        def on_partitions_revoked(self, revoked):  # type: ignore[no-untyped-def]
            out(f, "revoke " + ",".join(str(p.partition) for p in revoked))

    if extra.pop("assignor", None) == "range":
        from kafka.coordinator.assignors.range import RangePartitionAssignor
        extra["partition_assignment_strategy"] = (RangePartitionAssignor,)  # type: ignore[assignment]
    c = KafkaConsumer(bootstrap_servers=bs, group_id=group, auto_offset_reset="earliest",
                      enable_auto_commit=False, session_timeout_ms=6000,
                      heartbeat_interval_ms=500, **extra)
    c.subscribe([topic], listener=L())
    while True:
        batch = c.poll(200)
        for _tp, msgs in batch.items():
            for m in msgs:
                out(f, f"msg {m.partition} {m.offset}")
        if batch:
            c.commit()


def run_aiokafka(bs: str, group: str, topic: str, f, extra: dict[str, str]) -> None:  # type: ignore[no-untyped-def]
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener

    class L(ConsumerRebalanceListener):
        async def on_partitions_assigned(self, assigned):  # type: ignore[no-untyped-def]
            out(f, "assign " + ",".join(str(p.partition) for p in assigned))

        async def on_partitions_revoked(self, revoked):  # type: ignore[no-untyped-def]
            out(f, "revoke " + ",".join(str(p.partition) for p in revoked))

    if extra.pop("assignor", None) == "range":
        from aiokafka.coordinator.assignors.range import RangePartitionAssignor
        extra["partition_assignment_strategy"] = (RangePartitionAssignor,)  # type: ignore[assignment]

    async def main() -> None:
        c = AIOKafkaConsumer(bootstrap_servers=bs, group_id=group, auto_offset_reset="earliest",
                             enable_auto_commit=False, session_timeout_ms=6000,
                             heartbeat_interval_ms=500, **extra)
        c.subscribe([topic], listener=L())
        await c.start()
        while True:
            batch = await c.getmany(timeout_ms=200)
            for _tp, msgs in batch.items():
                for m in msgs:
                    out(f, f"msg {m.partition} {m.offset}")
            if batch:
                await c.commit()

    asyncio.run(main())


def main() -> None:
    # SIGTERM = a polite stop: leave the group (SIGKILL is the crash case)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    client, bs, group, topic, path = sys.argv[1:6]
    extra: dict[str, str] = dict(a.split("=", 1) for a in sys.argv[6:])
    with open(path, "a") as f:
        out(f, f"start {time.time()}")
        {"confluent": run_confluent, "kafka-python": run_kafka_python,
         "aiokafka": run_aiokafka}[client](bs, group, topic, f, extra)


if __name__ == "__main__":
    main()

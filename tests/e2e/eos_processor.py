"""Consume-transform-produce with exactly-once semantics, run as its own process so tests can
kill -9 it: reads IN (group GROUP), writes one output per input to OUT inside a transaction that
also commits the consumed offsets (send_offsets_to_transaction).

    python eos_processor.py BOOTSTRAP IN OUT GROUP TRANSACTIONAL_ID
"""

from __future__ import annotations

import sys

from confluent_kafka import Consumer, KafkaException, Producer


def main() -> None:
    bs, src, dst, group, tid = sys.argv[1:6]
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "isolation.level": "read_committed",
                  "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    p = Producer({"bootstrap.servers": bs, "transactional.id": tid,
                  "transaction.timeout.ms": 10000})
    p.init_transactions(30)
    c.subscribe([src])
    while True:
        msgs = [m for m in c.consume(50, 0.5) if m.error() is None]
        if not msgs:
            continue
        p.begin_transaction()
        for m in msgs:
            p.produce(dst, key=m.key(), value=b"out:" + (m.value() or b""))
        try:
            p.send_offsets_to_transaction(c.position(c.assignment()),
                                          c.consumer_group_metadata(), 30)
            p.commit_transaction(30)
        except KafkaException as e:
            if e.args[0].txn_requires_abort():
                p.abort_transaction(30)
                # rewind to the last committed position and redo the batch
                for tp in c.committed(c.assignment(), 30):
                    c.seek(tp)
            else:
                raise


if __name__ == "__main__":
    main()

"""The client commands of `samsa`: topics, groups, produce, consume and demo (built on confluent-kafka), and
`log` (reads log dirs)."""

from __future__ import annotations

import argparse

from . import consume, demo, groups, log, pipeline, produce, registry, schemas, topics, transactions


def add_parsers(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    topics.add_parser(sub)
    groups.add_parser(sub)
    produce.add_parser(sub)
    consume.add_parser(sub)
    demo.add_parser(sub)
    pipeline.add_parser(sub)
    log.add_parser(sub)
    schemas.add_parser(sub)
    registry.add_parser(sub)
    transactions.add_parser(sub)

"""The client commands of `samsa`: topics, produce, consume and demo (built on confluent-kafka)."""

from __future__ import annotations

import argparse

from . import consume, demo, produce, topics


def add_parsers(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    topics.add_parser(sub)
    produce.add_parser(sub)
    consume.add_parser(sub)
    demo.add_parser(sub)

"""Compatibility levels: which earlier versions a new schema is checked against and in which
direction. BACKWARD: the new schema reads data written with the old one; FORWARD: the old schema
reads data written with the new one; FULL: both. Transitive levels check every live version,
the others only the latest."""

from __future__ import annotations

from .formats import ParsedSchema

LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL",
          "FULL_TRANSITIVE")
DEFAULT_LEVEL = "BACKWARD"


def check(level: str, new: ParsedSchema, previous: list[tuple[int, ParsedSchema]]) -> list[str]:
    """Messages explaining every incompatibility of `new` with the earlier versions (oldest first,
    as (version, schema)) that `level` involves; empty when compatible."""
    if level == "NONE" or not previous:
        return []
    targets = previous if level.endswith("_TRANSITIVE") else previous[-1:]
    backward = level.startswith(("BACKWARD", "FULL"))
    forward = level.startswith(("FORWARD", "FULL"))
    out: list[str] = []
    for version, old in reversed(targets):
        if backward:
            out += [f"oldSchemaVersion: {version}, compatibility: BACKWARD, {m}"
                    for m in new.compatibility(old)]
        if forward:
            out += [f"oldSchemaVersion: {version}, compatibility: FORWARD, {m}"
                    for m in old.compatibility(new)]
    return out

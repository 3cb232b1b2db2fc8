"""What CreateAcls and DeleteAcls write to the metadata log, decided on the active controller
against the committed image: new AccessControlEntryRecords for bindings not already present
(Kafka keeps a binding once), RemoveAccessControlEntryRecords for every binding a filter matches."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence

from samsa.cluster.metadata.records import (
    AccessControlEntryRecord,
    Record,
    RemoveAccessControlEntryRecord,
)
from samsa.security.authorizer import AclBinding, AclError, AclFilter, validate_binding

Result = tuple[int, str | None]  # error code, message


def create_records(acls: Mapping[uuid.UUID, AclBinding], bindings: Sequence[AclBinding],
                   invalid_request: int) -> tuple[list[Record], list[Result]]:
    """Records for the valid new bindings and one result per binding."""
    present = set(acls.values())
    records: list[Record] = []
    results: list[Result] = []
    for b in bindings:
        try:
            validate_binding(b)
        except AclError as e:
            results.append((invalid_request, str(e)))
            continue
        if b not in present:
            present.add(b)
            records.append(AccessControlEntryRecord(
                uuid.uuid4(), b.resource_type, b.resource_name, b.pattern_type, b.principal,
                b.host, b.operation, b.permission))
        results.append((0, None))
    return records, results


def delete_records(acls: Mapping[uuid.UUID, AclBinding], filters: Sequence[AclFilter],
                   invalid_request: int
                   ) -> tuple[list[Record], list[tuple[int, str | None, list[AclBinding]]]]:
    """Removal records and, per filter, its error and the bindings it matched (a binding that
    two filters match is removed once, and reported by both, as Kafka does)."""
    records: list[Record] = []
    gone: set[uuid.UUID] = set()
    out: list[tuple[int, str | None, list[AclBinding]]] = []
    for f in filters:
        try:
            f.validate()
        except AclError as e:
            out.append((invalid_request, str(e), []))
            continue
        matched = []
        for i, b in acls.items():
            if f.matches(b):
                matched.append(b)
                if i not in gone:
                    gone.add(i)
                    records.append(RemoveAccessControlEntryRecord(i))
        out.append((0, None, matched))
    return records, out

"""Kafka offsets stored in the target database, next to the rows: a sink writes both in one
transaction, so after a crash the database says exactly how far it got, and the task rewinds the
consumer there (no duplicate, no gap) instead of trusting the group's committed offsets."""

from __future__ import annotations

from ...data import INT32_SCHEMA, STRING_SCHEMA
from .database import Database
from .dialect import Column

DEFAULT_TABLE = "__samsa_connect_offsets"


class OffsetTable:
    """(connector, topic, partition) -> next offset to consume. Created on first use."""

    COLUMNS = ("connector", "topic", "partition", "next_offset")
    KEYS = ("connector", "topic", "partition")

    def __init__(self, db: Database, table: str = DEFAULT_TABLE) -> None:
        self.db = db
        self.table = table
        d = db.dialect
        int_type = d.sql_type(INT32_SCHEMA)
        text_type = d.sql_type(STRING_SCHEMA)
        self._create = d.create_table(table, [
            Column("connector", text_type, nullable=False), Column("topic", text_type, nullable=False),
            Column("partition", int_type, nullable=False), Column("next_offset", "BIGINT", nullable=False),
        ], self.KEYS)
        self._upsert = d.upsert(table, self.COLUMNS, self.KEYS)
        self._delete = (f"DELETE FROM {d.table(table)} WHERE {d.quote('connector')} = {d.placeholder} "
                        f"AND {d.quote('topic')} = {d.placeholder} AND {d.quote('partition')} = "
                        f"{d.placeholder}")
        self._select = (f"SELECT {d.quote('topic')}, {d.quote('partition')}, "
                        f"{d.quote('next_offset')} FROM {d.table(table)} WHERE "
                        f"{d.quote('connector')} = {d.placeholder}")
        self.ensure()

    def ensure(self) -> None:
        """CREATE TABLE IF NOT EXISTS (run when constructed, outside any caller's transaction)."""
        self.db.execute(self._create)

    def read(self, connector: str) -> dict[tuple[str, int], int]:
        return {(str(t), int(p)): int(o) for t, p, o in self.db.execute(self._select, [connector])}

    def write(self, connector: str, offsets: dict[tuple[str, int], int]) -> None:
        """Upsert these next offsets; call it inside the transaction that wrote the rows."""
        if not offsets:
            return
        self.db.executemany(self._upsert, [(connector, t, p, int(o))
                                           for (t, p), o in sorted(offsets.items())])

    def alter(self, connector: str, offsets: dict[tuple[str, int], int | None]) -> None:
        """An operator's edit (PATCH/DELETE /connectors/<name>/offsets, KIP-875): a next offset to
        resume from, or None to forget the partition (the consumer's reset policy then applies)."""
        with self.db.transaction():
            for (topic, partition), offset in sorted(offsets.items()):
                if offset is None:
                    self.db.execute(self._delete, [connector, topic, partition])
                else:
                    self.write(connector, {(topic, partition): offset})

"""The shared SQL layer against real databases: DuckDB files in tmp_path and a real PostgreSQL
server (the postgres_server fixture). URLs, dialect types and statements, transactions, the
offset table, and how driver errors map to Connect's (retriable vs fatal vs bad data)."""

from __future__ import annotations

import decimal
from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa.connect.connectors.sql import Column, OffsetTable, open_database
from samsa.connect.connectors.sql.database import Database, PostgresDatabase
from samsa.connect.connectors.sql.dialect import DuckDBDialect, PostgresDialect
from samsa.connect.connectors.sql.url import parse_url
from samsa.connect.data import (
    BOOLEAN_SCHEMA,
    BYTES_SCHEMA,
    FLOAT32_SCHEMA,
    FLOAT64_SCHEMA,
    INT8_SCHEMA,
    INT16_SCHEMA,
    INT32_SCHEMA,
    INT64_SCHEMA,
    STRING_SCHEMA,
    array_schema,
    date_schema,
    decimal_schema,
    time_schema,
    timestamp_schema,
)
from samsa.connect.errors import ConnectException, DataException, RetriableException
from samsa.testing.postgres import PostgresServer

pytestmark = pytest.mark.timeout(120)


# ---- URLs ---------------------------------------------------------------------------------------
def test_urls() -> None:
    p = parse_url("jdbc:postgresql://db.local:6543/shop?user=app&password=s3cret&sslmode=disable")
    assert p.kind == "postgresql"
    assert p.params == {"host": "db.local", "port": "6543", "dbname": "shop", "user": "app",
                        "password": "s3cret", "sslmode": "disable"}
    p = parse_url("postgres://u:pw@127.0.0.1/x", user="other", password="pw2")
    assert (p.params["user"], p.params["password"], p.params["port"]) == ("other", "pw2", "5432")
    assert parse_url("postgresql://h:1/d").params["dbname"] == "d"
    assert parse_url("jdbc:duckdb:/tmp/a.db").params == {"path": "/tmp/a.db"}
    assert parse_url("duckdb:///tmp/a.db").params == {"path": "/tmp/a.db"}
    assert parse_url("duckdb:rel.db").params == {"path": "rel.db"}
    assert parse_url(":memory:").params == {"path": ":memory:"}
    assert parse_url("jdbc:duckdb:").params == {"path": ":memory:"}


def test_unknown_scheme_is_a_clear_error_without_the_password() -> None:
    with pytest.raises(ConnectException, match="Unsupported connection URL") as e:
        open_database("jdbc:mysql://h/db?user=a&password=topsecret")
    assert "topsecret" not in str(e.value)
    assert not isinstance(e.value, RetriableException)


# ---- dialects -----------------------------------------------------------------------------------
def test_types_like_confluents_dialects() -> None:
    pg, duck = PostgresDialect(), DuckDBDialect()
    cases = [(INT8_SCHEMA, "SMALLINT", "TINYINT"), (INT16_SCHEMA, "SMALLINT", "SMALLINT"),
             (INT32_SCHEMA, "INT", "INTEGER"), (INT64_SCHEMA, "BIGINT", "BIGINT"),
             (FLOAT32_SCHEMA, "REAL", "FLOAT"), (FLOAT64_SCHEMA, "DOUBLE PRECISION", "DOUBLE"),
             (BOOLEAN_SCHEMA, "BOOLEAN", "BOOLEAN"), (STRING_SCHEMA, "TEXT", "VARCHAR"),
             (BYTES_SCHEMA, "BYTEA", "BLOB"), (decimal_schema(2), "DECIMAL", "DECIMAL(38, 2)"),
             (date_schema(), "DATE", "DATE"), (time_schema(), "TIME", "TIME"),
             (timestamp_schema(), "TIMESTAMP", "TIMESTAMP"),
             (array_schema(INT32_SCHEMA), "JSONB", "JSON")]
    for schema, want_pg, want_duck in cases:
        assert (pg.sql_type(schema), duck.sql_type(schema)) == (want_pg, want_duck), schema


def test_statements() -> None:
    pg = PostgresDialect()
    assert pg.upsert("t", ["id", "v"], ["id"]) == (
        'INSERT INTO "t" ("id", "v") VALUES (%s, %s) ON CONFLICT ("id") DO UPDATE SET "v"=EXCLUDED."v"')
    assert pg.upsert("t", ["id"], ["id"]).endswith("DO NOTHING")
    assert pg.update("s.t", ["v"], ["a", "b"]) == \
        'UPDATE "s"."t" SET "v" = %s WHERE "a" = %s AND "b" = %s'
    assert DuckDBDialect().delete("t", ["k"]) == 'DELETE FROM "t" WHERE "k" = ?'
    assert PostgresDialect(quote_identifiers=False).insert("t", ["a"]) == \
        "INSERT INTO t (a) VALUES (%s)"
    assert pg.quote('we"ird') == '"we""ird"'
    with pytest.raises(ConnectException):
        pg.table("a..b")


# ---- both databases -----------------------------------------------------------------------------
@pytest.fixture(params=["duckdb", "postgresql"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    if request.param == "duckdb":
        url = f"jdbc:duckdb:{tmp_path / 'test.duckdb'}"
    else:
        pg: PostgresServer = request.getfixturevalue("postgres_server")
        pg.create_database("sql_layer")
        url = pg.jdbc_url("sql_layer")
    database = open_database(url, user="postgres")
    try:
        yield database
    finally:
        database.close()


def _create(db: Database) -> None:
    d = db.dialect
    db.execute(d.create_table("items", [
        Column("id", d.sql_type(INT64_SCHEMA), nullable=False),
        Column("name", d.sql_type(STRING_SCHEMA), nullable=False),
        Column("price", d.sql_type(decimal_schema(2)))], ["id"]))


def test_upsert_batch_transaction_and_columns(db: Database) -> None:
    d = db.dialect
    assert db.table_columns("items") is None
    _create(db)
    cols = db.table_columns("items")
    assert cols is not None and list(cols) == ["id", "name", "price"]
    assert cols["id"] == "BIGINT"
    up = d.upsert("items", ["id", "name", "price"], ["id"])
    with db.transaction():
        db.executemany(up, [(i, f"n{i}", decimal.Decimal("1.50")) for i in range(1000)])
    with db.transaction():
        db.executemany(up, [(i, f"m{i}", None) for i in range(500, 1500)])
    rows = db.execute(f"SELECT count(*), count(price), min(name) FROM {d.table('items')}")
    assert rows == [(1500, 500, "m1000")]
    db.executemany(d.update("items", ["name"], ["id"]), [("u0", 0), ("u1", 1)])
    # a column Arrow cannot type (int and str mixed) still works (DuckDB's row-by-row path)
    db.executemany(d.update("items", ["name", "price"], ["id"]),
                   [("u2", 1, 2), ("u3", "2.5", 3)])
    rows = db.execute(f"SELECT id, name, price FROM {d.table('items')} WHERE id < 4 ORDER BY id")
    p = decimal.Decimal("1.50")
    assert rows == [(0, "u0", p), (1, "u1", p), (2, "u2", 1), (3, "u3", decimal.Decimal("2.5"))]
    with pytest.raises(RuntimeError), db.transaction():  # an exception rolls the batch back
        db.executemany(d.delete("items", ["id"]), [(i,) for i in range(100)])
        raise RuntimeError("boom")
    assert db.execute(f"SELECT count(*) FROM {d.table('items')}") == [(1500,)]
    db.execute(d.add_column("items", Column("extra", d.sql_type(BOOLEAN_SCHEMA))))
    cols = db.table_columns("items")
    assert cols is not None and "extra" in cols


def test_rows_that_do_not_fit_raise_data_exception(db: Database) -> None:
    _create(db)
    with pytest.raises(DataException), db.transaction():
        db.executemany(db.dialect.insert("items", ["id", "name"]), [(1, "a"), (2, None)])
    assert db.execute(f"SELECT count(*) FROM {db.dialect.table('items')}") == [(0,)]
    with pytest.raises(DataException):  # duplicate primary key
        db.executemany(db.dialect.insert("items", ["id", "name"]), [(1, "a"), (1, "b")])
    with pytest.raises(ConnectException) as e:  # a bad statement is not retriable
        db.execute("SELEC 1")
    assert not isinstance(e.value, RetriableException | DataException)


def test_offset_table_commits_with_the_rows(db: Database, tmp_path: Path) -> None:
    _create(db)
    offsets = OffsetTable(db)
    assert offsets.read("c1") == {}
    with db.transaction():
        db.execute(db.dialect.insert("items", ["id", "name"]), [1, "x"])
        offsets.write("c1", {("t", 0): 10, ("t", 1): 5})
        offsets.write("c2", {("t", 0): 99})
    with pytest.raises(RuntimeError), db.transaction():
        db.execute(db.dialect.insert("items", ["id", "name"]), [2, "y"])
        offsets.write("c1", {("t", 0): 11})
        raise RuntimeError("crash before commit")
    with db.transaction():
        offsets.write("c1", {("t", 1): 6})
    again = OffsetTable(db)  # a second construction finds the table
    assert again.read("c1") == {("t", 0): 10, ("t", 1): 6}
    assert again.read("c2") == {("t", 0): 99}
    assert db.execute(f"SELECT count(*) FROM {db.dialect.table('items')}") == [(1,)]


# ---- PostgreSQL failure modes -------------------------------------------------------------------
def test_postgres_wrong_role_and_missing_database_are_fatal(postgres_server: PostgresServer) -> None:
    with pytest.raises(ConnectException, match="refused the credentials") as e:
        open_database(postgres_server.jdbc_url(), user="nobody", password="wrong")
    assert not isinstance(e.value, RetriableException)
    with pytest.raises(ConnectException, match="does not exist") as e:
        open_database(postgres_server.jdbc_url("no_such_db"), user="postgres")
    assert not isinstance(e.value, RetriableException)


def test_postgres_down_is_retriable_and_reconnects(postgres_server: PostgresServer) -> None:
    postgres_server.create_database("sql_down")
    db = open_database(postgres_server.jdbc_url("sql_down"), user="postgres")
    try:
        assert db.execute("SELECT 1") == [(1,)]
        postgres_server.kill()
        try:
            with pytest.raises(RetriableException):
                db.execute("SELECT 1")
            with pytest.raises(RetriableException):  # reconnecting while down: still retriable
                db.execute("SELECT 1")
        finally:
            postgres_server.start()
        assert db.execute("SELECT 2") == [(2,)]
    finally:
        db.close()


def test_postgres_copy_upsert_and_copy_rows(postgres_server: PostgresServer) -> None:
    """The COPY fast paths write what executemany would, and refuse what it would refuse."""
    postgres_server.create_database("sql_copy")
    db = open_database(postgres_server.jdbc_url("sql_copy"), user="postgres")
    try:
        _create(db)
        assert isinstance(db, PostgresDatabase)
        copy_rows, copy_upsert = db.copy_rows, db.copy_upsert
        with db.transaction():
            copy_rows("items", ["id", "name"], [(i, f"a{i}") for i in range(100)])
        with db.transaction():
            copy_upsert("items", ["id", "name", "price"], ["id"],
                        [(i, f"b{i}", decimal.Decimal("2.5")) for i in range(50, 150)])
            copy_upsert("items", ["id", "name"], ["id"], [(0, "zero")])  # another stage
        rows = db.execute('SELECT count(*), count(price), min(name), max(name) FROM "items"')
        assert rows == [(150, 100, "a1", "zero")]
        with pytest.raises(DataException), db.transaction():
            copy_upsert("items", ["id", "name"], ["id"], [(1, "x"), (2, None)])
        assert db.execute('SELECT name FROM "items" WHERE id = 1') == [("a1",)]
    finally:
        db.close()

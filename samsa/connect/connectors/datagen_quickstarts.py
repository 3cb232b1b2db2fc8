"""The field layouts of Confluent's datagen quickstarts `orders`, `users` and `pageviews`, as
Connect schemas, with generators of values in the same shapes and ranges.

Each generator is a pure function of a random.Random and the record's iteration number (the
count of records the task produced before it), so a seeded task is deterministic and a task
restored from its offset continues the same sequence."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..data import (
    FLOAT64_SCHEMA,
    INT32_SCHEMA,
    INT64_SCHEMA,
    STRING_SCHEMA,
    Schema,
    Struct,
    struct_schema,
)

# The ordertime / registertime range the quickstarts draw from (Feb 2017 - Feb 2018, in ms).
TIME_MIN = 1487715775521
TIME_MAX = 1519273364600

ADDRESS_SCHEMA = struct_schema([("city", STRING_SCHEMA), ("state", STRING_SCHEMA),
                                ("zipcode", INT64_SCHEMA)], name="ksql.address")
ORDERS_SCHEMA = struct_schema([
    ("ordertime", INT64_SCHEMA), ("orderid", INT32_SCHEMA), ("itemid", STRING_SCHEMA),
    ("orderunits", FLOAT64_SCHEMA), ("address", ADDRESS_SCHEMA)], name="ksql.orders")
USERS_SCHEMA = struct_schema([
    ("registertime", INT64_SCHEMA), ("userid", STRING_SCHEMA), ("regionid", STRING_SCHEMA),
    ("gender", STRING_SCHEMA)], name="ksql.users")
PAGEVIEWS_SCHEMA = struct_schema([
    ("viewtime", INT64_SCHEMA), ("userid", STRING_SCHEMA), ("pageid", STRING_SCHEMA)],
    name="ksql.pageviews")


def _digits(rng: random.Random, low: int, high: int) -> str:
    """`[1-9]{low,high}`-like: a random number of digits 1..9."""
    return "".join(str(rng.randint(1, 9)) for _ in range(rng.randint(low, high)))


def _orders(rng: random.Random, iteration: int) -> Struct:
    item = str(rng.randint(1, 9)) + "".join(str(rng.randint(0, 9)) for _ in range(rng.randint(0, 2)))
    address = Struct(ADDRESS_SCHEMA, {
        "city": "City_" + _digits(rng, 0, 2),
        "state": "State_" + _digits(rng, 0, 2),
        "zipcode": rng.randrange(10000, 99999)})
    return Struct(ORDERS_SCHEMA, {
        "ordertime": rng.randrange(TIME_MIN, TIME_MAX),
        "orderid": iteration % (1 << 31),
        "itemid": "Item_" + item,
        "orderunits": rng.uniform(0.1, 10.0),
        "address": address})


def _users(rng: random.Random, iteration: int) -> Struct:
    return Struct(USERS_SCHEMA, {
        "registertime": rng.randrange(TIME_MIN, TIME_MAX),
        "userid": f"User_{rng.randint(1, 9)}",
        "regionid": f"Region_{rng.randint(1, 9)}",
        "gender": rng.choice(("MALE", "FEMALE", "OTHER"))})


def _pageviews(rng: random.Random, iteration: int) -> Struct:
    return Struct(PAGEVIEWS_SCHEMA, {
        "viewtime": 1 + 10 * iteration,
        "userid": f"User_{rng.randint(1, 9)}",
        "pageid": f"Page_{rng.randint(1, 9)}{rng.randint(0, 9)}"})


@dataclass(frozen=True)
class Quickstart:
    name: str
    schema: Schema
    key_field: str  # the quickstart's default schema.keyfield
    generate: Callable[[random.Random, int], Struct]

    def field_schema(self, field: str) -> Schema | None:
        f = self.schema.field(field)
        return f.schema if f is not None else None

    def key(self, value: Struct, field: str) -> tuple[Schema | None, Any]:
        return self.field_schema(field), value.get(field)


QUICKSTARTS: dict[str, Quickstart] = {q.name: q for q in (
    Quickstart("orders", ORDERS_SCHEMA, "orderid", _orders),
    Quickstart("users", USERS_SCHEMA, "userid", _users),
    Quickstart("pageviews", PAGEVIEWS_SCHEMA, "viewtime", _pageviews),
)}

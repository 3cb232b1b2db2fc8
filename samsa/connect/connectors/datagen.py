"""io.confluent.kafka.connect.datagen.DatagenConnector: generates mock data in the layouts of
Confluent's datagen quickstarts (orders, users, pageviews), with Connect schemas so the Avro,
Protobuf and JSON Schema converters write typed records.

The offsets are Confluent's: source partition {"task.id": n}, offset {"task.generation",
"current.iteration", "random.seed"} holding the task's *next* state (the random generator is
re-seeded after every record with a seed drawn from itself, and that seed is stored), so a
restarted task continues the count and, with `random.seed`, the exact sequence. Each record carries
the headers task.generation, task.id and current.iteration (INT64). Keys are the value's
`schema.keyfield` field (by default the quickstart's: orderid, userid, viewtime) with its schema.

Differences from Confluent's connector: only the three quickstarts above (no `schema.string` /
`schema.filename` Avro templates, so `quickstart` is required); after `iterations` records a
task goes idle instead of failing."""

from __future__ import annotations

import logging
import random
from typing import Any

from ..api import SourceConnector, SourceTask, Task
from ..config_def import AbstractConfig, ConfigDef, ConfigType, ConfigValue, Importance
from ..data import INT64_SCHEMA, Headers, SourceRecord
from ..errors import ConfigException, ConnectException
from ._util import Stopper
from .datagen_quickstarts import QUICKSTARTS, Quickstart

log = logging.getLogger("samsa.connect.connectors.datagen")

KAFKA_TOPIC_CONF = "kafka.topic"
MAXINTERVAL_CONF = "max.interval"
ITERATIONS_CONF = "iterations"
SCHEMA_KEYFIELD_CONF = "schema.keyfield"
QUICKSTART_CONF = "quickstart"
RANDOM_SEED_CONF = "random.seed"
TASK_ID = "task.id"
TASK_GENERATION = "task.generation"
CURRENT_ITERATION = "current.iteration"
RANDOM_SEED = "random.seed"


def _check_quickstart(name: str, value: Any) -> None:
    if not isinstance(value, str) or value.lower() not in QUICKSTARTS:
        raise ConfigException(name, value, "Must be one of the quickstarts "
                              + ", ".join(QUICKSTARTS)
                              + " (Samsa's datagen has no schema.string / schema.filename)")


CONFIG_DEF = (
    ConfigDef()
    .define(KAFKA_TOPIC_CONF, ConfigType.STRING, importance=Importance.HIGH,
            documentation="The topic the generated records go to")
    .define(MAXINTERVAL_CONF, ConfigType.LONG, 500, None, Importance.HIGH,
            "Upper bound (ms) of the random pause before each record")
    .define(ITERATIONS_CONF, ConfigType.INT, -1, None, Importance.HIGH,
            "How many records each task produces; less than 1 for no limit")
    .define(SCHEMA_KEYFIELD_CONF, ConfigType.STRING, "", None, Importance.HIGH,
            "The value field whose value becomes the record key; empty for the quickstart's own "
            "key field")
    .define(QUICKSTART_CONF, ConfigType.STRING, validator=_check_quickstart,
            importance=Importance.HIGH,
            documentation="Which data to generate: " + ", ".join(QUICKSTARTS))
    .define(RANDOM_SEED_CONF, ConfigType.LONG, None, None, Importance.LOW,
            "Seed of the random data: connectors with the same seed produce the same records; the "
            "tasks of one connector produce different ones")
)


def _key_field(config: AbstractConfig, quickstart: Quickstart) -> str:
    return config.get(SCHEMA_KEYFIELD_CONF) or quickstart.key_field


class DatagenConnector(SourceConnector):
    def __init__(self) -> None:
        self._props: dict[str, str] = {}

    def start(self, props: dict[str, str]) -> None:
        try:
            config = AbstractConfig(CONFIG_DEF, props)
            quickstart = QUICKSTARTS[config.get(QUICKSTART_CONF).lower()]
            field = _key_field(config, quickstart)
            if quickstart.field_schema(field) is None:
                raise ConfigException(SCHEMA_KEYFIELD_CONF, field,
                                      f"not a field of the {quickstart.name} quickstart")
        except ConfigException as e:
            raise ConfigException("Datagen connector could not start because of an error in the "
                                  f"configuration: {e}") from e
        self._props = dict(props)

    def task_class(self) -> type[Task]:
        return DatagenTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [{**self._props, TASK_ID: str(i)} for i in range(max_tasks)]

    def stop(self) -> None:
        pass

    def config(self) -> ConfigDef:
        return CONFIG_DEF

    def validate(self, props: dict[str, str]) -> dict[str, ConfigValue]:
        values = super().validate(props)
        quickstart = QUICKSTARTS.get(str(values[QUICKSTART_CONF].value or "").lower())
        keyfield = values[SCHEMA_KEYFIELD_CONF]
        if quickstart is not None and keyfield.value and not keyfield.errors \
                and quickstart.field_schema(keyfield.value) is None:
            keyfield.errors.append(f"Invalid value {keyfield.value} for configuration "
                                   f"{SCHEMA_KEYFIELD_CONF}: not a field of the {quickstart.name} "
                                   f"quickstart ({', '.join(f.name for f in quickstart.schema.fields)})")
        return values


def _stored_int(offset: dict[str, Any], key: str) -> int:
    value = offset.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ConnectException(f"Stored datagen offset has no integer '{key}': {offset!r}")
    return value


class DatagenTask(SourceTask):
    """One record per poll after a random pause of up to max.interval ms."""

    idle_wait_s = 1.0

    def __init__(self) -> None:
        self.topic = ""
        self.task_id = 0
        self.count = 0
        self.generation = 0
        self.max_interval_ms = 0
        self.iterations = -1
        self.key_field = ""
        self.quickstart: Quickstart = QUICKSTARTS["orders"]
        self._rng = random.Random()
        self._pause_rng = random.Random()  # pauses do not consume the data's random stream
        self._partition: dict[str, Any] = {}
        self._stopper = Stopper()
        self._done_logged = False

    def start(self, props: dict[str, str]) -> None:
        config = AbstractConfig(CONFIG_DEF, props)
        self.topic = config.get(KAFKA_TOPIC_CONF)
        self.max_interval_ms = int(config.get(MAXINTERVAL_CONF))
        self.iterations = int(config.get(ITERATIONS_CONF))
        self.quickstart = QUICKSTARTS[config.get(QUICKSTART_CONF).lower()]
        self.key_field = _key_field(config, self.quickstart)
        if self.quickstart.field_schema(self.key_field) is None:
            raise ConnectException(f"{SCHEMA_KEYFIELD_CONF} {self.key_field!r} is not a field of "
                                   f"the {self.quickstart.name} quickstart")
        try:
            self.task_id = int(props.get(TASK_ID, "0"))
        except ValueError as e:
            raise ConnectException(f"Invalid {TASK_ID}: {props.get(TASK_ID)!r}") from e
        self._partition = {TASK_ID: self.task_id}
        seed = config.get(RANDOM_SEED_CONF)
        if seed is not None:
            self._rng.seed(seed)
            for _ in range(self.task_id):  # every task its own deterministic stream
                self._rng.seed(self._rng.getrandbits(63))
        offset = self.context.offset_storage_reader.offset(self._partition)
        if offset is not None:  # the stored offset is this task's next state
            self.generation = _stored_int(offset, TASK_GENERATION)
            self.count = _stored_int(offset, CURRENT_ITERATION)
            self._rng.seed(_stored_int(offset, RANDOM_SEED))
        log.info("Datagen task %d (%s) starting at iteration %d, generation %d", self.task_id,
                 self.quickstart.name, self.count, self.generation)

    def poll(self) -> list[SourceRecord] | None:
        if self._stopper.stopped:
            return None
        if 0 < self.iterations <= self.count:
            if not self._done_logged:
                log.info("Datagen task %d generated the configured %d records; idle from now on",
                         self.task_id, self.iterations)
                self._done_logged = True
            self._stopper.wait(self.idle_wait_s)
            return None
        if self.max_interval_ms > 0 and \
                self._stopper.wait(self._pause_rng.random() * self.max_interval_ms / 1000):
            return None
        value = self.quickstart.generate(self._rng, self.count)
        key_schema, key = self.quickstart.key(value, self.key_field)
        seed = self._rng.getrandbits(63)  # re-seed, so the offset can restore this exact state
        self._rng.seed(seed)
        offset = {TASK_GENERATION: self.generation + 1, CURRENT_ITERATION: self.count + 1,
                  RANDOM_SEED: seed}
        headers = Headers()
        headers.add(TASK_GENERATION, self.generation, INT64_SCHEMA)
        headers.add(TASK_ID, self.task_id, INT64_SCHEMA)
        headers.add(CURRENT_ITERATION, self.count, INT64_SCHEMA)
        record = SourceRecord(self.topic, None, key_schema, key, self.quickstart.schema, value,
                              None, headers, source_partition=dict(self._partition),
                              source_offset=offset)
        self.count += 1
        return [record]

    def stop(self) -> None:
        self._stopper.stop()

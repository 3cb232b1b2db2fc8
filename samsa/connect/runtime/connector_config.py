"""Connector settings the runtime itself reads (Kafka's ConnectorConfig, SourceConnectorConfig,
SinkConnectorConfig): class, tasks.max, converters, transforms, error handling, exactly-once and
the sink's topics. The connector's own keys are defined by its ConfigDef."""

from __future__ import annotations

import re
from typing import Any

from ..config_def import (
    ConfigDef,
    ConfigType,
    Importance,
    at_least,
    non_empty_string,
    one_of,
)
from ..errors import ConfigException

H, M, L = Importance.HIGH, Importance.MEDIUM, Importance.LOW
S, INT, B, LST, LONG = ConfigType.STRING, ConfigType.INT, ConfigType.BOOLEAN, ConfigType.LIST, ConfigType.LONG
COMMON, TRANSFORMS, PREDICATES, ERRORS, EOS = "Common", "Transforms", "Predicates", "Error Handling", \
    "Exactly Once Support"


def _check_name(name: str, value: Any) -> None:
    non_empty_string(name, value)
    if any(ord(c) < 32 for c in str(value)):
        raise ConfigException(name, value, "connector name may not contain ISO control characters")


def common_def() -> ConfigDef:
    d = ConfigDef()
    order = iter(range(1, 100))
    d.define("name", S, None, _check_name, H, "Globally unique name to use for this connector.",
             group=COMMON, order_in_group=next(order), display_name="Connector name")
    d.define("connector.class", S, None, non_empty_string, H,
             "Name or alias of the class for this connector.", group=COMMON,
             order_in_group=next(order), display_name="Connector class")
    d.define("tasks.max", INT, 1, at_least(1), H, "Maximum number of tasks to use for this connector.",
             group=COMMON, order_in_group=next(order), display_name="Tasks max")
    d.define("tasks.max.enforce", B, True, None, L,
             "Fail the connector when it returns more task configs than tasks.max.", group=COMMON,
             order_in_group=next(order))
    d.define("key.converter", ConfigType.CLASS, None, None, L,
             "Converter for keys; overrides the worker's.", group=COMMON, order_in_group=next(order))
    d.define("value.converter", ConfigType.CLASS, None, None, L,
             "Converter for values; overrides the worker's.", group=COMMON, order_in_group=next(order))
    d.define("header.converter", ConfigType.CLASS, None, None, L,
             "Converter for header values; overrides the worker's.", group=COMMON,
             order_in_group=next(order))
    d.define("config.action.reload", S, "restart", one_of("none", "restart"), L,
             "What to do when external config providers change a value.", group=COMMON,
             order_in_group=next(order))
    d.define("transforms", LST, "", None, L, "Aliases for the transformations to apply to records.",
             group=TRANSFORMS, order_in_group=1, display_name="Transforms")
    d.define("predicates", LST, "", None, L, "Aliases for the predicates used by transformations.",
             group=PREDICATES, order_in_group=1, display_name="Predicates")
    d.define("errors.retry.timeout", LONG, 0, None, M,
             "How long a failed operation is retried; 0 no retries, -1 forever.", group=ERRORS,
             order_in_group=1)
    d.define("errors.retry.delay.max.ms", LONG, 60000, None, M,
             "The longest wait between two retries (exponential back-off).", group=ERRORS,
             order_in_group=2)
    d.define("errors.tolerance", S, "none", one_of("none", "all"), M,
             "none: an error fails the task; all: problematic records are skipped.", group=ERRORS,
             order_in_group=3)
    d.define("errors.log.enable", B, False, None, M,
             "Log each failed operation and problematic record.", group=ERRORS, order_in_group=4)
    d.define("errors.log.include.messages", B, False, None, M,
             "Include the record in the error log.", group=ERRORS, order_in_group=5)
    d.define("errors.restart.enable", B, None, None, L,
             "Samsa extension: restart this connector's FAILED tasks automatically, with a "
             "back-off doubling from 1 s (default: the worker's errors.restart.enable, false).",
             group=ERRORS, order_in_group=20)
    d.define("errors.restart.max.backoff.ms", LONG, None, None, L,
             "Samsa extension: the longest wait before an automatic restart (default: the "
             "worker's, 60000).", group=ERRORS, order_in_group=21)
    return d


def source_def() -> ConfigDef:
    d = common_def()
    d.define("exactly.once.support", S, "requested", one_of("requested", "required",
                                                            case_insensitive=True), M,
             "required: fail unless the connector declares exactly-once support.", group=EOS,
             order_in_group=1)
    d.define("transaction.boundary", S, "poll", one_of("poll", "interval", "connector",
                                                       case_insensitive=True), M,
             "Where transactions of an exactly-once source end: after each poll, every interval, "
             "or where the connector says.", group=EOS, order_in_group=2)
    d.define("transaction.boundary.interval.ms", LONG, None, None, L,
             "For transaction.boundary=interval (default offset.flush.interval.ms).", group=EOS,
             order_in_group=3)
    return d


def _check_regex(name: str, value: Any) -> None:
    if value:
        try:
            re.compile(value)
        except re.error as e:
            raise ConfigException(name, value, f"not a valid regular expression: {e}") from None


def sink_def() -> ConfigDef:
    d = common_def()
    d.define("topics", LST, "", None, H, "List of topics to consume.", group=COMMON, order_in_group=4,
             display_name="Topics")
    d.define("topics.regex", S, "", _check_regex, H, "Regular expression of topics to consume.",
             group=COMMON, order_in_group=4, display_name="Topics regex")
    d.define("errors.deadletterqueue.topic.name", S, "", None, M,
             "Dead letter queue topic for records that fail conversion, transformation or put.",
             group=ERRORS, order_in_group=6)
    d.define("errors.deadletterqueue.topic.replication.factor", ConfigType.SHORT, 3, None, M,
             "Replication factor of the dead letter queue topic when it is created.", group=ERRORS,
             order_in_group=7)
    d.define("errors.deadletterqueue.context.headers.enable", B, False, None, M,
             "Add the __connect.errors.* headers (KIP-298) to dead letter queue records.",
             group=ERRORS, order_in_group=8)
    return d


def sink_topics_errors(props: dict[str, str]) -> list[str]:
    """Kafka's SinkConnectorConfig.validate: exactly one of topics / topics.regex, the DLQ not
    among the consumed topics."""
    topics = [t.strip() for t in props.get("topics", "").split(",") if t.strip()]
    regex = props.get("topics.regex", "").strip()
    errors = []
    if topics and regex:
        errors.append("topics and topics.regex are mutually exclusive options, but both are set.")
    if not topics and not regex:
        errors.append("Must configure one of topics or topics.regex")
    dlq = props.get("errors.deadletterqueue.topic.name", "").strip()
    if dlq and (dlq in topics or (regex and re.fullmatch(regex, dlq))):
        errors.append(f"The DLQ topic '{dlq}' may not be included in the list of topics "
                      f"('topics' or 'topics.regex') to consume")
    return errors

"""The Spark `samsa` source and sink over SASL_SSL and SSL with the options Spark's Kafka connector
passes to its Java client (`kafka.security.protocol`, `kafka.sasl.mechanism`,
`kafka.sasl.jaas.config`, `kafka.ssl.truststore.*`, `kafka.ssl.keystore.*`). ACLs are on: the
writer and the reader act as alice (SCRAM) and as the certificate CN=alice, granted only these
topics; a wrong password fails the job with the broker's reason instead of waiting out a
timeout."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa.testing.secure import SecureBroker
from tests.spark_util import create_topic, read_all

pytest.importorskip("pyspark")
from pyspark.sql import SparkSession  # noqa: E402

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def sb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    with SecureBroker(tmp_path_factory.mktemp("secure-spark"), acls=True) as b:
        yield b


def grant(sb: SecureBroker, topic: str, group_prefix: str | None = None) -> None:
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    acls = [AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, p, "*",
                       AclOperation.ALL, AclPermissionType.ALLOW)
            for p in ("User:alice", "User:CN=alice,OU=eng,O=acme")]
    acls += [AclBinding(ResourceType.GROUP, "samsa-spark", ResourcePatternType.LITERAL, p, "*",
                        AclOperation.ALL, AclPermissionType.ALLOW)
             for p in ("User:alice", "User:CN=alice,OU=eng,O=acme")]
    admin = AdminClient({"bootstrap.servers": sb.plaintext})
    for f in admin.create_acls(acls).values():
        f.result(timeout=30)


def test_write_and_read_over_sasl_ssl_and_ssl(spark: SparkSession, sb: SecureBroker) -> None:
    t = f"spk-{uuid.uuid4().hex[:6]}"
    create_topic(sb.plaintext, t, 2)
    grant(sb, t)
    scram = sb.spark_options("alice", "SCRAM-SHA-512")
    df = spark.createDataFrame([(f"k{i}", f"v{i}") for i in range(40)], "key string, value string")
    df.write.format("samsa").mode("append").options(**scram).option("topic", t).save()
    assert sorted(m.value() for m in read_all(sb.plaintext, t, committed=False)) == \
        sorted(f"v{i}".encode() for i in range(40))
    for opts in (scram, sb.spark_options(cert="alice"),
                 sb.spark_options("alice", "OAUTHBEARER")):
        got = (spark.read.format("samsa").options(**opts).option("subscribe", t)
               .option("startingOffsets", "earliest").load()
               .selectExpr("CAST(value AS STRING) AS v").collect())
        assert sorted(r.v for r in got) == sorted(f"v{i}" for i in range(40)), opts


def test_stream_over_sasl_ssl(spark: SparkSession, sb: SecureBroker, tmp_path: Path) -> None:
    """readStream and writeStream (exactly-once, transactional) as alice over SASL_SSL."""
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    src, dst = f"spk-src-{uuid.uuid4().hex[:6]}", f"spk-dst-{uuid.uuid4().hex[:6]}"
    for t in (src, dst, "_samsa_spark_sink"):
        create_topic(sb.plaintext, t, 1)
        grant(sb, t)
    # the sink's transactions and its control topic reader
    admin = AdminClient({"bootstrap.servers": sb.plaintext})
    extra = [AclBinding(ResourceType.TRANSACTIONAL_ID, "samsa-spark-", ResourcePatternType.PREFIXED,
                        "User:alice", "*", AclOperation.ALL, AclPermissionType.ALLOW),
             AclBinding(ResourceType.GROUP, "samsa-spark", ResourcePatternType.PREFIXED,
                        "User:alice", "*", AclOperation.ALL, AclPermissionType.ALLOW)]
    for f in admin.create_acls(extra).values():
        f.result(timeout=30)
    spark.createDataFrame([(f"s{i}",) for i in range(25)], "value string").write \
        .format("samsa").mode("append").options(**sb.spark_options("alice")) \
        .option("topic", src).save()
    opts = sb.spark_options("alice", "SCRAM-SHA-256")
    q = (spark.readStream.format("samsa").options(**opts).option("subscribe", src)
         .option("startingOffsets", "earliest").load().selectExpr("value")
         .writeStream.format("samsa").options(**opts).option("topic", dst)
         .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
    q.awaitTermination(240)
    assert q.exception() is None
    assert sorted(m.value() for m in read_all(sb.plaintext, dst)) == \
        sorted(f"s{i}".encode() for i in range(25))


def test_wrong_password_fails_the_job_with_the_reason(spark: SparkSession, sb: SecureBroker) -> None:
    t = f"spk-bad-{uuid.uuid4().hex[:6]}"
    create_topic(sb.plaintext, t, 1)
    bad = {**sb.spark_options("alice", "PLAIN"),
           "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule '
                                     'required username="alice" password="wrong";'}
    df = spark.createDataFrame([("x",)], "value string")
    with pytest.raises(Exception, match="Authentication failed"):
        df.write.format("samsa").mode("append").options(**bad).option("topic", t).save()
    with pytest.raises(Exception, match="Authentication failed"):
        spark.read.format("samsa").options(**bad).option("subscribe", t).load().collect()
    # both fail with the broker's answer (before the fix: the write waited out its 120 s flush
    # and failed with "records unsent", the read waited out its metadata timeout)


def test_jks_store_is_refused_with_a_clear_error(spark: SparkSession, sb: SecureBroker) -> None:
    opts = {**sb.spark_options("alice"), "kafka.ssl.truststore.type": "JKS",
            "kafka.ssl.truststore.location": "/etc/kafka/truststore.jks"}
    with pytest.raises(Exception, match="JKS is not supported"):
        spark.read.format("samsa").options(**opts).option("subscribe", "x").load().collect()

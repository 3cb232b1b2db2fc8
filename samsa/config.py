"""Kafka-named configuration: broker settings and topic-level settings with their broker synonyms.

Values are kept as strings (as Kafka's DescribeConfigs reports them) and parsed by type on use.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from pathlib import Path

LONG_MAX = 9223372036854775807


@dataclass(frozen=True)
class ConfigDef:
    name: str
    type: str  # boolean, string, int, short, long, double, list, class, password
    default: str | None
    doc: str
    broker_synonym: str | None = None  # for topic configs: the broker setting providing the default
    valid: tuple[str, ...] = ()  # allowed values (for a list: allowed items)
    # Broker configs: how Samsa lets it change at run time (Kafka's "Update Mode" names):
    # read-only (restart needed), per-broker, cluster-wide (IncrementalAlterConfigs on "" or an id).
    mode: str = "read-only"
    at_least: float | None = None  # numeric range, as Kafka's ConfigDef validators
    at_most: float | None = None


# Kafka's describe-configs ConfigType numbers
CONFIG_TYPE = {"boolean": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6, "list": 7,
               "class": 8, "password": 9}

TOPIC_CONFIGS: dict[str, ConfigDef] = {c.name: c for c in [
    ConfigDef("cleanup.policy", "list", "delete",
              "What happens to old segments: delete (by retention), compact (latest record per "
              "key), both, or nothing (an empty list keeps everything).",
              "log.cleanup.policy", ("delete", "compact")),
    ConfigDef("compression.type", "string", "producer",
              "Codec batches are stored with; producer keeps the producer's codec.",
              "compression.type", ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
    ConfigDef("compression.gzip.level", "int", "-1", "gzip level when compression.type=gzip.",
              "compression.gzip.level"),
    ConfigDef("compression.lz4.level", "int", "9", "lz4 level when compression.type=lz4.",
              "compression.lz4.level", at_least=1, at_most=17),
    ConfigDef("compression.zstd.level", "int", "3", "zstd level when compression.type=zstd.",
              "compression.zstd.level", at_least=-131072, at_most=22),
    ConfigDef("delete.retention.ms", "long", "86400000",
              "How long a compacted topic keeps tombstones after cleaning.",
              "log.cleaner.delete.retention.ms", at_least=0),
    ConfigDef("file.delete.delay.ms", "long", "60000", "Wait before a deleted segment file goes.",
              "log.segment.delete.delay.ms", at_least=0),
    ConfigDef("flush.messages", "long", str(LONG_MAX), "fsync after this many messages.",
              "log.flush.interval.messages", at_least=1),
    ConfigDef("flush.ms", "long", str(LONG_MAX), "fsync after this many milliseconds.",
              "log.flush.interval.ms", at_least=0),
    ConfigDef("follower.replication.throttled.replicas", "list", "",
              "Replicas throttled on the follower side (partition:broker or *)."),
    ConfigDef("index.interval.bytes", "int", "4096", "Log bytes between offset-index entries.",
              "log.index.interval.bytes", at_least=0),
    ConfigDef("leader.replication.throttled.replicas", "list", "",
              "Replicas throttled on the leader side (partition:broker or *)."),
    ConfigDef("local.retention.bytes", "long", "-2",
              "Local size limit with tiered storage (-2: retention.bytes).",
              "log.local.retention.bytes", at_least=-2),
    ConfigDef("local.retention.ms", "long", "-2",
              "Local age limit with tiered storage (-2: retention.ms).",
              "log.local.retention.ms", at_least=-2),
    ConfigDef("max.compaction.lag.ms", "long", str(LONG_MAX),
              "Longest time a record may stay uncompacted.",
              "log.cleaner.max.compaction.lag.ms", at_least=1),
    ConfigDef("max.message.bytes", "int", "1048588", "Largest record batch accepted.",
              "message.max.bytes", at_least=0),
    ConfigDef("message.timestamp.after.max.ms", "long", "3600000",
              "How far ahead of the broker clock a CreateTime timestamp may be.",
              "log.message.timestamp.after.max.ms", at_least=0),
    ConfigDef("message.timestamp.before.max.ms", "long", str(LONG_MAX),
              "How far behind the broker clock a CreateTime timestamp may be.",
              "log.message.timestamp.before.max.ms", at_least=0),
    ConfigDef("message.timestamp.type", "string", "CreateTime",
              "Record timestamps: the producer's (CreateTime) or the broker's (LogAppendTime).",
              "log.message.timestamp.type", ("CreateTime", "LogAppendTime")),
    ConfigDef("min.cleanable.dirty.ratio", "double", "0.5",
              "Share of uncompacted bytes that makes a log worth cleaning.",
              "log.cleaner.min.cleanable.ratio", at_least=0, at_most=1),
    ConfigDef("min.compaction.lag.ms", "long", "0", "Shortest time a record stays uncompacted.",
              "log.cleaner.min.compaction.lag.ms", at_least=0),
    ConfigDef("min.insync.replicas", "int", "1", "Replicas that must have an acks=all write.",
              "min.insync.replicas", at_least=1),
    ConfigDef("preallocate", "boolean", "false", "Preallocate new segment files.",
              "log.preallocate"),
    ConfigDef("remote.log.copy.disable", "boolean", "false",
              "Stop copying segments to tiered storage."),
    ConfigDef("remote.log.delete.on.disable", "boolean", "false",
              "Delete tiered data when tiered storage is turned off."),
    ConfigDef("remote.storage.enable", "boolean", "false", "Tiered storage for this topic."),
    ConfigDef("retention.bytes", "long", "-1",
              "Partition size above which the oldest segments go (-1: no limit).",
              "log.retention.bytes"),
    ConfigDef("retention.ms", "long", "604800000",
              "Age after which a segment goes (-1: no limit).", "log.retention.ms", at_least=-1),
    ConfigDef("segment.bytes", "int", "1073741824", "Size at which a segment file is rolled.",
              "log.segment.bytes", at_least=14),
    ConfigDef("segment.index.bytes", "int", "10485760", "Largest offset index of a segment.",
              "log.index.size.max.bytes", at_least=4),
    ConfigDef("segment.jitter.ms", "long", "0", "Random time taken off segment.ms.",
              "log.roll.jitter.ms", at_least=0),
    ConfigDef("segment.ms", "long", "604800000", "Age at which a segment is rolled.",
              "log.roll.ms", at_least=1),
    ConfigDef("unclean.leader.election.enable", "boolean", "false",
              "Let an out-of-sync replica become leader.", "unclean.leader.election.enable"),
    ConfigDef("confluent.key.schema.validation", "boolean", "false",
              "Reject records whose key is not schema-registry framed with an id registered under "
              "<topic>-key.", None),
    ConfigDef("confluent.value.schema.validation", "boolean", "false",
              "Reject records whose value is not schema-registry framed with an id registered under "
              "<topic>-value.", None),
]}

BROKER_CONFIGS: dict[str, ConfigDef] = {c.name: c for c in [
    ConfigDef("node.id", "int", "1", "This broker's id.", at_least=0),
    ConfigDef("broker.id", "int", "1", "Alias of node.id."),
    ConfigDef("listeners", "string", "PLAINTEXT://127.0.0.1:9092", "Addresses to listen on."),
    ConfigDef("advertised.listeners", "string", None,
              "Addresses given to clients (default: listeners)."),
    ConfigDef("log.dirs", "string", "./samsa-data", "Directories holding partition logs."),
    ConfigDef("num.partitions", "int", "1", "Partitions of auto-created topics.", at_least=1),
    ConfigDef("default.replication.factor", "int", "1", "Replication factor of auto-created topics."),
    ConfigDef("max.broker.partitions", "int", "4000",
              "Most partitions this broker hosts (KIP-578's name); creating more is refused."),
    ConfigDef("auto.create.topics.enable", "boolean", "true", "Create topics on first use."),
    ConfigDef("delete.topic.enable", "boolean", "true", "Allow topic deletion."),
    ConfigDef("socket.request.max.bytes", "int", "104857600", "Largest request accepted.",
              at_least=1),
    # -- network limits (docs/operations.md) --
    ConfigDef("queued.max.requests", "int", "500",
              "Requests read and not yet answered, over all connections, before the broker stops "
              "reading sockets (long-polling fetches and group joins excepted).", at_least=1),
    ConfigDef("queued.max.requests.per.connection", "int", "256",
              "Requests read and not yet answered on one connection before it stops being read "
              "(Samsa-specific: Kafka reads one request per connection at a time).", at_least=1),
    ConfigDef("max.connections", "int", "2147483647",
              "Connections the broker keeps open at once; new ones beyond are closed.", at_least=0),
    ConfigDef("max.connections.per.ip", "int", "2147483647",
              "Connections allowed from one IP address; new ones beyond are closed.", at_least=0),
    # -- end network limits --
    # -- replication throttles (Kafka's QuotaConfigs; set by `samsa partitions reassign
    # --throttle`, cleared by --verify). Accepted and stored; see docs/operations.md for what
    # Samsa enforces. --
    ConfigDef("leader.replication.throttled.rate", "long", str(LONG_MAX),
              "Bytes/s a leader sends to followers of the replicas listed in a topic's "
              "leader.replication.throttled.replicas.", mode="cluster-wide", at_least=0),
    ConfigDef("follower.replication.throttled.rate", "long", str(LONG_MAX),
              "Bytes/s a follower fetches for the replicas listed in a topic's "
              "follower.replication.throttled.replicas.", mode="cluster-wide", at_least=0),
    ConfigDef("replica.alter.log.dirs.io.max.bytes.per.second", "long", str(LONG_MAX),
              "Bytes/s for moving replicas between log dirs of one broker.", mode="cluster-wide",
              at_least=0),
    # -- end replication throttles --
    # -- client quotas (helper "quotas"; Kafka's QuotaConfig) --
    ConfigDef("quota.window.num", "int", "11",
              "Samples a client quota rate is measured over.", at_least=1),
    ConfigDef("quota.window.size.seconds", "int", "1",
              "Length of one client quota sample.", at_least=1),
    # -- end client quotas --
    ConfigDef("max.request.partition.size.limit", "int", "2000",
              "Most partitions one DescribeTopicPartitions response holds.", at_least=1),
    ConfigDef("log.retention.check.interval.ms", "long", "300000", "Retention check period.",
              at_least=1),
    ConfigDef("log.retention.hours", "int", "168", "Retention in hours (below .minutes and .ms)."),
    ConfigDef("log.retention.minutes", "int", None, "Retention in minutes (below .ms)."),
    ConfigDef("log.flush.scheduler.interval.ms", "long", str(LONG_MAX),
              "Flush check period; flush period when log.flush.interval.ms is unset."),
    ConfigDef("log.flush.offset.checkpoint.interval.ms", "int", "60000", "Recovery point period.",
              at_least=0),
    ConfigDef("message.max.bytes", "int", "1048588", "Largest record batch accepted.",
              mode="cluster-wide", at_least=0),
    ConfigDef("cluster.id", "string", None, "Cluster id (generated on first start)."),
    # -- KRaft: roles, listeners, the controller quorum (docs/operations.md) --
    ConfigDef("controller.listener.names", "string", "CONTROLLER",
              "Names of the listeners the controller serves (the first is the one brokers and "
              "other controllers connect to)."),
    ConfigDef("inter.broker.listener.name", "string", "PLAINTEXT",
              "Listener brokers use to talk to each other."),
    ConfigDef("listener.security.protocol.map", "string",
              "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
              "Security protocol of each listener name; while it is not set, controller listeners "
              "not in it are PLAINTEXT."),
    ConfigDef("controller.quorum.voters", "list", "",
              "Static voters of the controller quorum: id@host:port,... (empty with no "
              "controller.quorum.bootstrap.servers: a single self-formatting combined node)."),
    ConfigDef("controller.quorum.bootstrap.servers", "list", "",
              "host:port of controllers used to discover the quorum (KIP-853)."),
    ConfigDef("controller.quorum.election.timeout.ms", "int", "1000",
              "Time without a leader before a voter starts an election.", at_least=1),
    ConfigDef("controller.quorum.fetch.timeout.ms", "int", "2000",
              "Time without a successful fetch from the leader before a voter starts an election.",
              at_least=1),
    ConfigDef("controller.quorum.election.backoff.max.ms", "int", "1000",
              "Longest random wait before a new election.", at_least=0),
    ConfigDef("controller.quorum.request.timeout.ms", "int", "2000",
              "How long a quorum request waits for its response.", at_least=1),
    ConfigDef("controller.quorum.retry.backoff.ms", "int", "20",
              "Wait before a failed quorum request is retried.", at_least=0),
    ConfigDef("controller.quorum.append.linger.ms", "int", "25",
              "How long the leader waits to batch records before appending them.", at_least=0),
    ConfigDef("broker.heartbeat.interval.ms", "int", "2000",
              "Time between a broker's heartbeats to the active controller.", at_least=1),
    ConfigDef("broker.session.timeout.ms", "int", "9000",
              "A broker silent for this long is fenced by the controller.", at_least=1),
    ConfigDef("initial.broker.registration.timeout.ms", "int", "60000",
              "How long a starting broker tries to register before it gives up.", at_least=1),
    ConfigDef("broker.rack", "string", None, "Rack of this broker (for replica placement)."),
    ConfigDef("metadata.log.dir", "string", None,
              "Directory of the __cluster_metadata log (default: the first of log.dirs)."),
    ConfigDef("metadata.log.max.record.bytes.between.snapshots", "long", "20971520",
              "Record bytes appended to the metadata log before a new snapshot is taken.",
              at_least=1),
    ConfigDef("metadata.log.max.snapshot.interval.ms", "long", "3600000",
              "Longest time between metadata snapshots while records are appended (0: never by "
              "time).", at_least=0),
    ConfigDef("metadata.log.segment.bytes", "int", "1073741824",
              "Segment size of the metadata log.", at_least=12),
    ConfigDef("metadata.max.retention.bytes", "long", "104857600",
              "Metadata log bytes kept behind the latest snapshot (-1: no limit)."),
    ConfigDef("metadata.max.retention.ms", "long", "604800000",
              "Age of metadata log segments and snapshots kept behind the latest snapshot."),
    # -- replication (samsa/cluster/replication) --
    ConfigDef("replica.lag.time.max.ms", "long", "30000",
              "A follower that has not caught up for this long leaves the ISR.", at_least=1),
    ConfigDef("replica.fetch.wait.max.ms", "int", "500",
              "Longest time a follower's Fetch waits at the leader for data.", at_least=0),
    ConfigDef("replica.fetch.min.bytes", "int", "1",
              "Bytes a follower's Fetch waits for at the leader.", at_least=1),
    ConfigDef("replica.fetch.max.bytes", "int", "1048576",
              "Bytes a follower fetches per partition (a larger first batch still comes).",
              at_least=0),
    ConfigDef("replica.fetch.response.max.bytes", "int", "10485760",
              "Bytes of one follower Fetch response over all partitions.", at_least=0),
    ConfigDef("replica.fetch.backoff.ms", "int", "1000",
              "Pause after a follower Fetch failed.", at_least=0),
    ConfigDef("replica.socket.timeout.ms", "int", "30000",
              "Timeout of a follower's requests to the leader.", at_least=1),
    ConfigDef("num.replica.fetchers", "int", "1",
              "Fetcher tasks per source broker (partitions are spread over them).", at_least=1),
    ConfigDef("replica.high.watermark.checkpoint.interval.ms", "long", "5000",
              "How often high watermarks are written to disk.", at_least=1),
    ConfigDef("offsets.commit.timeout.ms", "int", "5000",
              "How long a coordinator write waits for the ISR before it fails.", at_least=1),
    ConfigDef("replica.selector.class", "string", None,
              "Where consumers with a rack read (KIP-392): unset reads leaders only; "
              "org.apache.kafka.common.replica.RackAwareReplicaSelector sends a consumer to a "
              "replica in its client.rack."),
    ConfigDef("auto.leader.rebalance.enable", "boolean", "true",
              "The controller moves leadership back to preferred replicas when a broker's "
              "imbalance exceeds leader.imbalance.per.broker.percentage."),
    ConfigDef("leader.imbalance.check.interval.seconds", "long", "300",
              "How often the controller checks the leader imbalance.", at_least=1),
    ConfigDef("leader.imbalance.per.broker.percentage", "int", "10",
              "Share of a broker's preferred partitions led elsewhere that triggers a "
              "rebalance.", at_least=0),
    # -- end KRaft --
    ConfigDef("process.roles", "list", "broker,controller", "Roles of this node.",
              valid=("broker", "controller")),
    ConfigDef("offsets.topic.num.partitions", "int", "50", "Partitions of __consumer_offsets.",
              at_least=1),
    ConfigDef("offsets.topic.replication.factor", "short", "1", "RF of __consumer_offsets.",
              at_least=1),
    ConfigDef("transaction.state.log.replication.factor", "short", "1", "RF of txn state.",
              at_least=1),
    ConfigDef("transaction.state.log.min.isr", "int", "1", "Min ISR of txn state.", at_least=1),
    ConfigDef("max.incremental.fetch.session.cache.slots", "int", "1000",
              "Incremental fetch sessions kept (0 disables them).", at_least=0),
    ConfigDef("group.initial.rebalance.delay.ms", "int", "3000", "Initial rebalance delay."),
    ConfigDef("group.min.session.timeout.ms", "int", "6000", "Smallest session timeout allowed."),
    ConfigDef("group.max.session.timeout.ms", "int", "1800000", "Largest session timeout allowed."),
    ConfigDef("offsets.retention.minutes", "int", "10080", "Committed offsets of empty groups "
              "are kept this long.", at_least=1),
    ConfigDef("offsets.retention.check.interval.ms", "long", "600000", "Offset expiry period.",
              at_least=1),
    ConfigDef("offset.metadata.max.bytes", "int", "4096", "Largest commit metadata string."),
    ConfigDef("group.consumer.heartbeat.interval.ms", "int", "5000",
              "Heartbeat interval given to KIP-848 consumers.", at_least=1),
    ConfigDef("group.consumer.session.timeout.ms", "int", "45000",
              "Session timeout of KIP-848 consumers.", at_least=1),
    ConfigDef("transaction.state.log.num.partitions", "int", "50",
              "Partitions of __transaction_state.", at_least=1),
    ConfigDef("transaction.max.timeout.ms", "int", "900000",
              "Largest transaction timeout a producer may ask for.", at_least=1),
    ConfigDef("transaction.abort.timed.out.transaction.cleanup.interval.ms", "int", "10000",
              "How often timed-out transactions are looked for.", at_least=1),
    ConfigDef("transactional.id.expiration.ms", "int", "604800000",
              "Idle transactional ids are forgotten after this long.", at_least=1),
    # ---- ACLs (issue 17) ----
    ConfigDef("authorizer.class.name", "string", "",
              "The authorizer: org.apache.kafka.metadata.authorizer.StandardAuthorizer enables "
              "ACLs; empty (the default) authorizes every request."),
    ConfigDef("super.users", "string", "",
              "Principals (User:name, separated by ;) allowed everything whatever the ACLs."),
    ConfigDef("allow.everyone.if.no.acl.found", "boolean", "false",
              "Allow a request on a resource no ACL names (else it is denied)."),
    ConfigDef("producer.id.expiration.ms", "int", "86400000",
              "Idle producers' idempotence state is dropped after this long.", at_least=1),
    ConfigDef("producer.id.expiration.check.interval.ms", "int", "600000",
              "How often idle producers are looked for.", at_least=1),
    ConfigDef("offsets.topic.segment.bytes", "int", "104857600", "Segment size of "
              "__consumer_offsets.", at_least=1),
    ConfigDef("log.cleaner.enable", "boolean", "true", "Run the log cleaner (compaction)."),
    ConfigDef("log.cleaner.backoff.ms", "long", "15000", "Cleaner sleep when nothing is cleanable.",
              at_least=0),
    ConfigDef("log.cleaner.threads", "int", "1", "Cleaner threads (Samsa runs one).", at_least=0),
    ConfigDef("log.cleaner.dedupe.buffer.size", "long", "134217728",
              "Memory for the cleaner's key -> offset map."),
    ConfigDef("log.cleaner.io.buffer.size", "int", "524288", "Cleaner read/write buffer size.",
              at_least=0),
    ConfigDef("log.cleaner.io.buffer.load.factor", "double", "0.9", "Offset map load factor."),
    ConfigDef("log.cleaner.io.max.bytes.per.second", "double", "1.7976931348623157E308",
              "Cleaner I/O throttle."),
    ConfigDef("samsa.log.cleaner.mode", "string", "process",
              "Where cleaning runs: a child process, or a thread of the broker.",
              valid=("process", "thread")),
    ConfigDef("schema.registry.enable", "boolean", "false",
              "Run the schema registry inside the broker process."),
    ConfigDef("schema.registry.listeners", "string", "http://127.0.0.1:8081",
              "HTTP address of the embedded schema registry."),
    ConfigDef("schema.registry.leader.url", "string", None,
              "Forward registry writes to this registry (unset: this one is the writer)."),
    ConfigDef("schema.registry.compatibility", "string", "BACKWARD",
              "Default compatibility level of the embedded schema registry."),
    ConfigDef("schema.registry.topic", "string", "_schemas",
              "Topic holding the registry's schemas (also read for schema-validated topics)."),
    ConfigDef("connect.enable", "boolean", "false",
              "Run a distributed Kafka Connect worker inside the broker process "
              "(worker settings: connect.worker.<name>)."),
    ConfigDef("connect.listeners", "string", "http://127.0.0.1:8083",
              "REST listener of the embedded Connect worker."),
] + [replace(t, name=t.broker_synonym, broker_synonym=None, mode="cluster-wide")
     for t in TOPIC_CONFIGS.values()
     if t.broker_synonym and t.broker_synonym not in ("message.max.bytes",)]}

# Broker settings that differ from their topic config: no default (a synonym in other units
# provides it), other units, or a larger minimum (KIP-1030: log.segment.bytes >= 1 MiB in 4.0,
# while the topic's segment.bytes keeps its minimum of 14 bytes until Kafka 4.1).
for _c in [
    ConfigDef("log.retention.ms", "long", None,
              "Retention in ms (above .minutes and .hours; -1: no limit).", mode="cluster-wide"),
    ConfigDef("log.roll.ms", "long", None, "Roll period in ms (above log.roll.hours).",
              mode="cluster-wide"),
    ConfigDef("log.roll.hours", "int", "168", "Roll period in hours.", at_least=1),
    ConfigDef("log.roll.jitter.ms", "long", None, "Roll jitter in ms (above .hours).",
              mode="cluster-wide"),
    ConfigDef("log.roll.jitter.hours", "int", "0", "Roll jitter in hours.", at_least=0),
    ConfigDef("log.flush.interval.ms", "long", None,
              "fsync period in ms (unset: log.flush.scheduler.interval.ms).", mode="cluster-wide"),
    ConfigDef("log.segment.bytes", "int", "1073741824", "Size at which a segment file is rolled.",
              mode="cluster-wide", at_least=1 << 20),
]:
    BROKER_CONFIGS[_c.name] = _c

# -- SASL (helper sasl; docs/security.md): listener-overridable as listener.name.<l>.<name>, JAAS
# configs per mechanism as listener.name.<l>.<mechanism>.sasl.jaas.config --
for _c in [
    ConfigDef("sasl.enabled.mechanisms", "list", "GSSAPI",
              "SASL mechanisms SASL listeners accept (Samsa: PLAIN, SCRAM-SHA-256, "
              "SCRAM-SHA-512, OAUTHBEARER)."),
    ConfigDef("sasl.jaas.config", "password", None,
              "JAAS login module config (PLAIN users: user_<name>=\"<password>\")."),
    ConfigDef("sasl.server.max.receive.size", "int", "524288",
              "Largest frame accepted before a connection is authenticated."),
    ConfigDef("connections.max.reauth.ms", "long", "0",
              "SASL session lifetime: clients must re-authenticate within it (KIP-368; 0: never)."),
    ConfigDef("sasl.oauthbearer.jwks.endpoint.url", "string", None,
              "JWKS (file: or http(s): URL) OAUTHBEARER tokens are verified against (KIP-768)."),
    ConfigDef("sasl.oauthbearer.jwks.endpoint.refresh.ms", "long", "3600000",
              "How often the JWKS is read again."),
    ConfigDef("sasl.oauthbearer.expected.audience", "list", "",
              "Audiences an OAUTHBEARER token must name one of (empty: not checked)."),
    ConfigDef("sasl.oauthbearer.expected.issuer", "string", None,
              "Issuer an OAUTHBEARER token must name (unset: not checked)."),
    ConfigDef("sasl.oauthbearer.sub.claim.name", "string", "sub",
              "Claim holding the principal name."),
    ConfigDef("sasl.oauthbearer.scope.claim.name", "string", "scope", "Claim holding the scopes."),
    ConfigDef("sasl.oauthbearer.clock.skew.seconds", "int", "30",
              "Clock difference allowed when checking exp, iat and nbf."),
]:
    BROKER_CONFIGS[_c.name] = _c

# -- TLS listeners (samsa.security.ssl_context; helper tls). Each may also be given per listener
# as listener.name.<listener>.<name>, which wins over the plain name (Kafka's listener prefix).
# Key and trust stores change at run time (per broker, with the listener prefix, as Kafka); the
# rest needs a restart in Samsa.
for _c in [
    ConfigDef("ssl.keystore.type", "string", "PEM",
              "Key store format: PEM only in Samsa (Kafka's default is JKS).", mode="per-broker"),
    ConfigDef("ssl.keystore.location", "string", None,
              "PEM file holding the private key and the certificate chain.", mode="per-broker"),
    ConfigDef("ssl.keystore.password", "password", None,
              "Not used with PEM key stores (Kafka refuses it with PEM).", mode="per-broker"),
    ConfigDef("ssl.keystore.certificate.chain", "password", None,
              "Certificate chain as inline PEM text (instead of ssl.keystore.location).",
              mode="per-broker"),
    ConfigDef("ssl.keystore.key", "password", None,
              "Private key as inline PEM text (with ssl.keystore.certificate.chain).",
              mode="per-broker"),
    ConfigDef("ssl.key.password", "password", None, "Password of an encrypted private key.",
              mode="per-broker"),
    ConfigDef("ssl.truststore.type", "string", "PEM", "Trust store format: PEM only in Samsa.",
              mode="per-broker"),
    ConfigDef("ssl.truststore.location", "string", None,
              "PEM file of CA certificates client certificates are checked against.",
              mode="per-broker"),
    ConfigDef("ssl.truststore.password", "password", None, "Not used with PEM trust stores.",
              mode="per-broker"),
    ConfigDef("ssl.truststore.certificates", "password", None,
              "CA certificates as inline PEM text.", mode="per-broker"),
    ConfigDef("ssl.client.auth", "string", "none",
              "Client certificates: none, requested (verified if sent) or required.",
              valid=("none", "requested", "required")),
    ConfigDef("ssl.enabled.protocols", "list", "TLSv1.2,TLSv1.3", "TLS versions accepted."),
    ConfigDef("ssl.protocol", "string", "TLSv1.3", "Kafka's SSLContext protocol (informational)."),
    ConfigDef("ssl.cipher.suites", "list", "",
              "TLS 1.2 cipher suites (IANA or OpenSSL names); empty: OpenSSL's defaults."),
    ConfigDef("ssl.principal.mapping.rules", "string", "DEFAULT",
              "Rules mapping a client certificate's DN to a principal name "
              "(RULE:pattern/replacement/[LU], DEFAULT)."),
]:
    BROKER_CONFIGS[_c.name] = _c

# -- node-to-node TLS / SASL (sec-cluster; samsa.cluster.node_security, docs/security.md) --
for _c in [
    ConfigDef("security.inter.broker.protocol", "string", "PLAINTEXT",
              "Protocol brokers talk to each other with (the listener of that name); only one of "
              "this and inter.broker.listener.name may be set.",
              valid=("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")),
    ConfigDef("sasl.mechanism.inter.broker.protocol", "string", "GSSAPI",
              "SASL mechanism brokers log in to each other with (Samsa: PLAIN, SCRAM-SHA-256, "
              "SCRAM-SHA-512, OAUTHBEARER)."),
    ConfigDef("sasl.mechanism.controller.protocol", "string", "GSSAPI",
              "SASL mechanism nodes log in to the controllers with."),
    ConfigDef("ssl.endpoint.identification.algorithm", "string", "https",
              "Host name check of a peer node's certificate: https, or empty for none."),
]:
    BROKER_CONFIGS[_c.name] = _c

_LISTENER_PREFIXED = re.compile(r"^listener\.name\.[a-z0-9_]+\.(.+)$")


def config_def(name: str) -> ConfigDef | None:
    """The definition of a broker setting; listener.name.<l>.<setting> resolves to <setting>'s."""
    d = BROKER_CONFIGS.get(name)
    if d is None:
        m = _LISTENER_PREFIXED.match(name)
        if m is not None and m.group(1).startswith("ssl."):
            d = BROKER_CONFIGS.get(m.group(1))
    return d


# Broker settings given in several units (Kafka's brokerConfigSynonyms), highest precedence first;
# a topic config's default comes from the first one set.
_UNITS: dict[str, tuple[tuple[str, int], ...]] = {
    "retention.ms": (("log.retention.ms", 1), ("log.retention.minutes", 60_000),
                     ("log.retention.hours", 3_600_000)),
    "segment.ms": (("log.roll.ms", 1), ("log.roll.hours", 3_600_000)),
    "segment.jitter.ms": (("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", 3_600_000)),
    "flush.ms": (("log.flush.interval.ms", 1), ("log.flush.scheduler.interval.ms", 1)),
}
_SYNONYM_GROUPS = [tuple(n for n, _ in units) for units in _UNITS.values()]


def broker_synonyms(name: str) -> list[str]:
    """Names one broker setting can be given under, highest precedence first (DescribeConfigs
    lists synonyms in this order). log.flush.scheduler.interval.ms only backs log.flush.interval.ms,
    not the other way round."""
    for group in _SYNONYM_GROUPS:
        if name in group and not (name == "log.flush.scheduler.interval.ms"):
            return list(group)
    return [name]


STATIC_DEFAULTS: dict[str, str] = {k: d.default for k, d in BROKER_CONFIGS.items()
                                   if d.default is not None}


def is_read_only(name: str) -> bool:
    """True for a broker setting that only a restart changes (and unknown names)."""
    d = config_def(name)
    return d is None or d.mode == "read-only"


ENV_PREFIX = "SAMSA_"


class ConfigError(ValueError):
    """A configuration value that does not parse or is out of range."""


_INT_BITS = {"short": 16, "int": 32, "long": 64}


def _invalid(d: ConfigDef, value: str, why: str) -> ConfigError:
    return ConfigError(f"Invalid value {value!r} for configuration {d.name}: {why}")


def parse_value(d: ConfigDef, value: str) -> object:
    """Parse and validate one value as Kafka's ConfigDef does (type, then validator); raises
    ConfigError with Kafka's wording."""
    if d.name in THROTTLED_REPLICA_LISTS:
        _check_throttled_replicas(d, value, [x.strip() for x in value.split(",")])
    try:
        if d.type == "boolean":
            if value.strip().lower() not in ("true", "false"):
                raise ValueError
            return value.strip().lower() == "true"
        if d.type in _INT_BITS:
            n = int(value.strip())
            bits = _INT_BITS[d.type]
            if not -(1 << (bits - 1)) <= n < 1 << (bits - 1):
                raise ValueError
            parsed: object = n
        elif d.type == "double":
            parsed = float(value.strip())
        elif d.type == "list":
            # an empty list is valid (Kafka 4.0: cleanup.policy= deletes and compacts nothing)
            items = [x.strip() for x in value.split(",")] if value.strip() else []
            if not any(d.valid and x not in d.valid for x in items):
                return items
            parsed = items
        else:
            parsed = value
    except ValueError:
        raise ConfigError(f"Invalid value {value!r} for configuration {d.name}: "
                          f"expected a {d.type}") from None
    if d.type == "list":
        raise _invalid(d, value, f"String must be one of: {', '.join(d.valid)}")
    if d.valid and value not in d.valid:
        raise ConfigError(f"Invalid value {value!r} for configuration {d.name}: "
                          f"must be one of {', '.join(d.valid)}")
    if isinstance(parsed, int | float):
        if d.name.endswith("compression.gzip.level") and parsed != -1 and not 1 <= parsed <= 9:
            raise _invalid(d, value, "Value must be between 1 and 9, or -1")
        if d.at_least is not None and parsed < d.at_least:
            raise _invalid(d, value, f"Value must be at least {_num(d.at_least)}")
        if d.at_most is not None and parsed > d.at_most:
            raise _invalid(d, value, f"Value must be no more than {_num(d.at_most)}")
    return parsed


# Topic configs naming replicas as partition:broker (or "*"), Kafka's ThrottledReplicaListValidator.
THROTTLED_REPLICA_LISTS = frozenset({"leader.replication.throttled.replicas",
                                     "follower.replication.throttled.replicas"})
_REPLICA = re.compile(r"[0-9]+:[0-9]+")


def _check_throttled_replicas(d: ConfigDef, value: str, items: list[str]) -> None:
    """'*' alone, or partition:broker items (empty items only at the end, as Kafka allows)."""
    if items == ["*"]:
        return
    seen_empty = False
    for item in items:
        if not item:
            seen_empty = True
        elif seen_empty or not _REPLICA.fullmatch(item):
            raise _invalid(d, value, f"{d.name} must be the literal '*' or a list of replicas in "
                                     "the following format: [partitionId]:[brokerId],"
                                     "[partitionId]:[brokerId],...")


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def read_properties(path: str | Path) -> dict[str, str]:
    """A server.properties-style file: key=value lines, # comments."""
    out: dict[str, str] = {}
    for raw in Path(path).read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if sep < 0:
            raise ConfigError(f"{path}: cannot parse line {raw!r} (expected key=value)")
        out[line[:sep].strip()] = line[sep + 1 :].strip()
    return out


def env_overrides(environ: dict[str, str] | None = None) -> dict[str, str]:
    """SAMSA_LOG_DIRS=... -> log.dirs=... (underscores become dots, like Kafka's docker images)."""
    env = os.environ if environ is None else environ
    out = {}
    for k, v in env.items():
        if k.startswith(ENV_PREFIX) and k != "SAMSA_HOME":
            out[k[len(ENV_PREFIX):].lower().replace("_", ".")] = v
    return out


class BrokerConfig:
    """Static broker configuration: defaults < properties file < environment < CLI overrides."""

    def __init__(self, values: dict[str, str] | None = None) -> None:
        self.values: dict[str, str] = {}
        for k, v in (values or {}).items():
            d = config_def(k)
            if d is not None:
                parse_value(d, v)
            self.values[k] = v

    def get(self, name: str) -> str | None:
        if name in self.values:
            return self.values[name]
        d = BROKER_CONFIGS.get(name)
        return d.default if d else None

    def get_int(self, name: str) -> int:
        v = self.get(name)
        if v is None:
            raise ConfigError(f"{name} is not set")
        return int(v)

    def get_bool(self, name: str) -> bool:
        return (self.get(name) or "false").lower() == "true"

    def topic_default(self, topic_key: str) -> tuple[str | None, int]:
        """Broker-level value for a topic config and its DescribeConfigs source
        (4 STATIC_BROKER_CONFIG, 5 DEFAULT_CONFIG): the first of its broker synonyms set
        statically, converted to the topic's unit, else the topic default."""
        d = TOPIC_CONFIGS[topic_key]
        units = _UNITS.get(topic_key) or (((d.broker_synonym, 1),) if d.broker_synonym else ())
        for name, mult in units:
            if name in self.values:
                v = self.values[name]
                return (str(int(v) * mult) if mult != 1 else v), 4
        return d.default, 5

    def topic_defaults(self) -> dict[str, str]:
        return {k: v for k in TOPIC_CONFIGS if (v := self.topic_default(k)[0]) is not None}

    @property
    def log_dirs(self) -> list[Path]:
        return [Path(p) for p in (self.get("log.dirs") or "./samsa-data").split(",") if p]

    @property
    def node_id(self) -> int:
        return int(self.values.get("node.id", self.values.get("broker.id", "1")))


def validate_topic_configs(configs: dict[str, str | None]) -> None:
    for k, v in configs.items():
        d = TOPIC_CONFIGS.get(k)
        if d is None:
            raise ConfigError(f"Unknown topic config name: {k}")
        if v is not None and parse_value(d, v) is True and k == "remote.storage.enable":
            # as a Kafka broker with remote.log.storage.system.enable=false (Samsa has no tiers)
            raise ConfigError("Tiered Storage functionality is disabled in the broker. "
                              "Topic cannot be configured with remote log storage.")


def validate_broker_configs(configs: dict[str, str | None]) -> None:
    """Values for broker settings (static or dynamic), with the broker's own ranges."""
    for k, v in configs.items():
        d = config_def(k)
        if d is None:
            raise ConfigError(f"Unknown broker config name: {k}")
        if v is not None:
            parse_value(d, v)

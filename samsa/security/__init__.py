"""Security: who a connection is (principals), how it proved it (TLS, SASL), what it may do (ACLs)
and how much (quotas) — with Kafka's config names, semantics and error codes."""

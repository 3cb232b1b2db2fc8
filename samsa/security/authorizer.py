"""ACL authorization with the semantics of Kafka's StandardAuthorizer.

An ACL binding is a resource pattern (type, name, LITERAL or PREFIXED; the LITERAL name `*`
matches every resource of the type) and an entry (principal, host, operation, ALLOW or DENY).
A request is allowed when the principal is a super user, or no DENY binding matches and an ALLOW
binding matches (directly or through an implied operation), or no binding at all exists for the
resource and `allow.everyone.if.no.acl.found` is true. The bindings live in the metadata image
(AccessControlEntryRecord / RemoveAccessControlEntryRecord), so every broker holds the same set;
the authorizer indexes them by (resource type, name) and re-indexes when the set changes.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from samsa.security.principal import KafkaPrincipal

# Kafka's AclResourceType codes
R_ANY, R_TOPIC, R_GROUP, R_CLUSTER, R_TXN, R_TOKEN, R_USER = 1, 2, 3, 4, 5, 6, 7
RESOURCE_NAMES = {R_TOPIC: "TOPIC", R_GROUP: "GROUP", R_CLUSTER: "CLUSTER",
                  R_TXN: "TRANSACTIONAL_ID", R_TOKEN: "DELEGATION_TOKEN", R_USER: "USER"}
# PatternType codes
P_ANY, P_MATCH, P_LITERAL, P_PREFIXED = 1, 2, 3, 4
PATTERN_NAMES = {P_LITERAL: "LITERAL", P_PREFIXED: "PREFIXED"}
# AclOperation codes
(OP_ANY, OP_ALL, OP_READ, OP_WRITE, OP_CREATE, OP_DELETE, OP_ALTER, OP_DESCRIBE,
 OP_CLUSTER_ACTION, OP_DESCRIBE_CONFIGS, OP_ALTER_CONFIGS, OP_IDEMPOTENT_WRITE, OP_CREATE_TOKENS,
 OP_DESCRIBE_TOKENS) = range(1, 15)
OPERATION_NAMES = {OP_ALL: "ALL", OP_READ: "READ", OP_WRITE: "WRITE", OP_CREATE: "CREATE",
                   OP_DELETE: "DELETE", OP_ALTER: "ALTER", OP_DESCRIBE: "DESCRIBE",
                   OP_CLUSTER_ACTION: "CLUSTER_ACTION", OP_DESCRIBE_CONFIGS: "DESCRIBE_CONFIGS",
                   OP_ALTER_CONFIGS: "ALTER_CONFIGS", OP_IDEMPOTENT_WRITE: "IDEMPOTENT_WRITE",
                   OP_CREATE_TOKENS: "CREATE_TOKENS", OP_DESCRIBE_TOKENS: "DESCRIBE_TOKENS"}
# AclPermissionType codes
PERM_ANY, PERM_DENY, PERM_ALLOW = 1, 2, 3
PERMISSION_NAMES = {PERM_DENY: "DENY", PERM_ALLOW: "ALLOW"}

WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
# Authorizer class names Samsa accepts in authorizer.class.name (the KRaft one and ZooKeeper's
# AclAuthorizer, which behaves the same for these semantics).
AUTHORIZER_CLASSES = frozenset({STANDARD_AUTHORIZER, "kafka.security.authorizer.AclAuthorizer"})

# An ALLOW of any of these also allows the key operation (Kafka's implied operations).
_IMPLIED_BY: dict[int, frozenset[int]] = {
    OP_DESCRIBE: frozenset({OP_READ, OP_WRITE, OP_DELETE, OP_ALTER}),
    OP_DESCRIBE_CONFIGS: frozenset({OP_ALTER_CONFIGS}),
}

# Operations each resource type knows (Kafka's supported operations; for the bitfields).
RESOURCE_OPERATIONS: dict[int, tuple[int, ...]] = {
    R_TOPIC: (OP_READ, OP_WRITE, OP_CREATE, OP_DESCRIBE, OP_DELETE, OP_ALTER,
              OP_DESCRIBE_CONFIGS, OP_ALTER_CONFIGS),
    R_GROUP: (OP_READ, OP_DESCRIBE, OP_DELETE, OP_DESCRIBE_CONFIGS, OP_ALTER_CONFIGS),
    R_CLUSTER: (OP_CREATE, OP_CLUSTER_ACTION, OP_DESCRIBE_CONFIGS, OP_ALTER_CONFIGS,
                OP_IDEMPOTENT_WRITE, OP_ALTER, OP_DESCRIBE),
    R_TXN: (OP_DESCRIBE, OP_WRITE),
    R_TOKEN: (OP_DESCRIBE,),
    R_USER: (OP_CREATE_TOKENS, OP_DESCRIBE_TOKENS),
}

# authorized_operations value meaning "not asked for" (Kafka's Integer.MIN_VALUE)
OPS_NOT_REQUESTED = -2147483648


@dataclass(frozen=True, slots=True)
class AclBinding:
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int

    def __str__(self) -> str:
        return (f"(principal={self.principal}, host={self.host}, "
                f"operation={OPERATION_NAMES.get(self.operation, self.operation)}, "
                f"permissionType={PERMISSION_NAMES.get(self.permission, self.permission)}) on "
                f"{RESOURCE_NAMES.get(self.resource_type, self.resource_type)}:"
                f"{PATTERN_NAMES.get(self.pattern_type, self.pattern_type)}:{self.resource_name}")


class AclError(ValueError):
    """A binding or filter Kafka refuses (INVALID_REQUEST)."""


def validate_binding(b: AclBinding) -> None:
    """CreateAcls' checks, as Kafka's controller makes them: concrete resource type, pattern
    (LITERAL or PREFIXED), operation and permission, a non-empty name, a Type:name principal."""
    if b.resource_type not in RESOURCE_NAMES:
        raise AclError(f"Invalid resourceType {b.resource_type}")
    if b.pattern_type not in PATTERN_NAMES:
        raise AclError(f"Invalid patternType {b.pattern_type}")
    if b.operation not in OPERATION_NAMES:
        raise AclError(f"Invalid operation {b.operation}")
    if b.permission not in PERMISSION_NAMES:
        raise AclError(f"Invalid permissionType {b.permission}")
    if not b.resource_name:
        raise AclError("Resource name should not be empty")
    try:
        KafkaPrincipal.parse(b.principal)
    except ValueError:
        raise AclError(f"Could not parse principal from `{b.principal}` (no colon is present "
                       "separating the principal type from the principal name)") from None


@dataclass(frozen=True, slots=True)
class AclFilter:
    """DescribeAcls / DeleteAcls filter: None matches anything (Kafka's null), ANY codes too;
    pattern MATCH selects every pattern that would apply to the literal name."""

    resource_type: int = R_ANY
    resource_name: str | None = None
    pattern_type: int = P_ANY
    principal: str | None = None
    host: str | None = None
    operation: int = OP_ANY
    permission: int = PERM_ANY

    def validate(self) -> None:
        if self.resource_type not in RESOURCE_NAMES and self.resource_type != R_ANY:
            raise AclError(f"Invalid resource type {self.resource_type}")
        if self.pattern_type not in (P_ANY, P_MATCH, P_LITERAL, P_PREFIXED):
            raise AclError(f"Invalid pattern type {self.pattern_type}")
        if self.operation not in OPERATION_NAMES and self.operation != OP_ANY:
            raise AclError(f"Invalid operation {self.operation}")
        if self.permission not in (PERM_ANY, PERM_DENY, PERM_ALLOW):
            raise AclError(f"Invalid permission type {self.permission}")

    def matches(self, b: AclBinding) -> bool:
        if self.resource_type != R_ANY and b.resource_type != self.resource_type:
            return False
        if self.pattern_type == P_MATCH:
            if self.resource_name is not None and not _pattern_applies(
                    b.pattern_type, b.resource_name, self.resource_name):
                return False
        else:
            if self.pattern_type != P_ANY and b.pattern_type != self.pattern_type:
                return False
            if self.resource_name is not None and b.resource_name != self.resource_name:
                return False
        if self.principal is not None and b.principal != self.principal:
            return False
        if self.host is not None and b.host != self.host:
            return False
        if self.operation != OP_ANY and b.operation != self.operation:
            return False
        return self.permission == PERM_ANY or b.permission == self.permission


def _pattern_applies(pattern_type: int, pattern: str, name: str) -> bool:
    if pattern_type == P_LITERAL:
        return pattern == name or pattern == WILDCARD
    return pattern_type == P_PREFIXED and name.startswith(pattern)


class Authorizer:
    """Decides requests against the ACLs of a metadata image (`acls()` gives the current set,
    keyed by ACL id; re-indexed only when that mapping is a new object or changes size)."""

    def __init__(self, acls: Callable[[], Mapping[uuid.UUID, AclBinding]],
                 super_users: Iterable[str] = (), allow_if_no_acl: bool = False) -> None:
        self._acls = acls
        self.super_users = frozenset(s.strip() for s in super_users if s.strip())
        self.allow_if_no_acl = allow_if_no_acl
        self._indexed: tuple[int, int] = (0, -1)
        self._literal: dict[tuple[int, str], list[AclBinding]] = {}
        self._prefixed: dict[int, list[AclBinding]] = {}

    @classmethod
    def from_config(cls, get: Callable[[str], str | None],
                    acls: Callable[[], Mapping[uuid.UUID, AclBinding]]) -> Authorizer | None:
        """The authorizer `authorizer.class.name` asks for; None when unset (no authorization,
        as Kafka without an authorizer). ValueError for a class Samsa does not provide."""
        name = (get("authorizer.class.name") or "").strip()
        if not name:
            return None
        if name not in AUTHORIZER_CLASSES:
            raise ValueError(f"authorizer.class.name: unsupported authorizer {name!r} "
                             f"(supported: {STANDARD_AUTHORIZER})")
        supers = [s for s in (get("super.users") or "").split(";") if s.strip()]
        allow = (get("allow.everyone.if.no.acl.found") or "false").strip().lower() == "true"
        return cls(acls, supers, allow)

    def _index(self) -> None:
        acls = self._acls()
        key = (id(acls), getattr(acls, "version", len(acls)))
        if key == self._indexed:
            return
        literal: dict[tuple[int, str], list[AclBinding]] = {}
        prefixed: dict[int, list[AclBinding]] = {}
        for b in acls.values():
            if b.pattern_type == P_LITERAL:
                literal.setdefault((b.resource_type, b.resource_name), []).append(b)
            elif b.pattern_type == P_PREFIXED:
                prefixed.setdefault(b.resource_type, []).append(b)
        self._literal, self._prefixed, self._indexed = literal, prefixed, key

    def _matching(self, resource_type: int, name: str) -> list[AclBinding]:
        """Every binding whose pattern applies to the resource."""
        self._index()
        out = list(self._literal.get((resource_type, name), ()))
        if name != WILDCARD:
            out += self._literal.get((resource_type, WILDCARD), ())
        out += [b for b in self._prefixed.get(resource_type, ()) if name.startswith(b.resource_name)]
        return out

    def is_super(self, principal: KafkaPrincipal) -> bool:
        return str(principal) in self.super_users

    def authorize(self, principal: KafkaPrincipal, host: str, operation: int,
                  resource_type: int, name: str) -> bool:
        if str(principal) in self.super_users:
            return True
        bindings = self._matching(resource_type, name)
        if not bindings:
            return self.allow_if_no_acl
        who = {str(principal), WILDCARD_PRINCIPAL}
        implied = _IMPLIED_BY.get(operation, frozenset())
        allowed = False
        for b in bindings:
            if b.principal not in who or (b.host != WILDCARD and b.host != host):
                continue
            if b.permission == PERM_DENY:
                if b.operation == OP_ALL or b.operation == operation:
                    return False  # deny wins
            elif b.operation == OP_ALL or b.operation == operation or b.operation in implied:
                allowed = True
        return allowed

    def authorize_any(self, principal: KafkaPrincipal, host: str, operation: int,
                      resource_type: int) -> bool:
        """Kafka's authorizeByResourceType: may the principal do `operation` on at least one
        resource of the type (an ALLOW pattern no DENY pattern covers)?"""
        if str(principal) in self.super_users:
            return True
        self._index()
        who = {str(principal), WILDCARD_PRINCIPAL}
        rel = [b for b in self._acls().values() if b.resource_type == resource_type
               and b.principal in who and (b.host == WILDCARD or b.host == host)]
        denies = [b for b in rel if b.permission == PERM_DENY
                  and b.operation in (OP_ALL, operation)]
        if any(d.pattern_type == P_LITERAL and d.resource_name == WILDCARD for d in denies):
            return False
        for a in rel:
            if a.permission != PERM_ALLOW or a.operation not in (OP_ALL, operation):
                continue
            if a.pattern_type == P_LITERAL and a.resource_name == WILDCARD:
                if not denies:
                    return True
                continue
            covered = any(
                (d.pattern_type == P_PREFIXED and a.resource_name.startswith(d.resource_name))
                or (d.pattern_type == P_LITERAL and a.pattern_type == P_LITERAL
                    and d.resource_name == a.resource_name) for d in denies)
            if not covered:
                return True
        if self.allow_if_no_acl and not any(b.resource_type == resource_type
                                            for b in self._acls().values()):
            return True
        return False

    def operations(self, principal: KafkaPrincipal, host: str, resource_type: int,
                   name: str) -> int:
        """The authorized-operations bitfield (bit = AclOperation code) of a resource."""
        bits = 0
        for op in RESOURCE_OPERATIONS[resource_type]:
            if self.authorize(principal, host, op, resource_type, name):
                bits |= 1 << op
        return bits

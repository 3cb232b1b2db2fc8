"""SaslHandshake / SaslAuthenticate outside an authentication exchange (a listener without SASL, or
an already authenticated connection: Kafka answers ILLEGAL_SASL_STATE), and the SCRAM credential
APIs of KIP-554: DescribeUserScramCredentials (50) from the metadata image,
AlterUserScramCredentials (51) through the controller into the metadata log."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from samsa.cluster.metadata.records import (
    RemoveUserScramCredentialRecord,
    UserScramCredentialRecord,
)
from samsa.security.sasl.scram import (
    MAX_ITERATIONS,
    MECHANISM_NAMES,
    MIN_ITERATIONS,
    credential_from_salted,
)

from .configs import _configs_settled
from .forward import forward, must_forward

if TYPE_CHECKING:
    from samsa.broker.broker import Broker
    from samsa.broker.server import RequestContext
    from samsa.cluster.metadata.image import MetadataImage

UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34
RESOURCE_NOT_FOUND = 91
DUPLICATE_RESOURCE = 92
UNACCEPTABLE_CREDENTIAL = 93
NOT_CONTROLLER = 41


def sasl_handshake(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    return {"error_code": ILLEGAL_SASL_STATE, "mechanisms": ()}


def sasl_authenticate(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    return {"error_code": ILLEGAL_SASL_STATE,
            "error_message": "SaslAuthenticate request received after successful authentication",
            "auth_bytes": b"", "session_lifetime": 0}


def describe_user_scram_credentials(broker: Broker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    creds = broker.controller.image.scram_credentials
    by_user: dict[str, list[dict[str, int]]] = {}
    for (user, mech), rec in sorted(creds.items()):
        by_user.setdefault(user, []).append({"mechanism": mech, "iterations": rec.iterations})
    users = [u.name for u in req.users] if req.users else None
    results = []
    if users is None:
        results = [{"user": u, "error_code": 0, "error_message": None, "credential_infos": infos}
                   for u, infos in by_user.items()]
    else:
        counts = Counter(users)
        for u in dict.fromkeys(users):
            if counts[u] > 1:
                results.append({"user": u, "error_code": DUPLICATE_RESOURCE,
                                "error_message": "Cannot describe SCRAM credentials for the same "
                                                 "user twice in a single request"})
            elif u not in by_user:
                results.append({"user": u, "error_code": RESOURCE_NOT_FOUND,
                                "error_message": "Attempt to describe a user credential that does "
                                                 "not exist"})
            else:
                results.append({"user": u, "error_code": 0, "error_message": None,
                                "credential_infos": by_user[u]})
    return {"throttle_time": 0, "error_code": 0, "error_message": None, "results": results}


def _plan(req: Any) -> Any:
    """Check every alteration against the image (KIP-554's per-user errors); the records of the
    users with no error."""
    def run(image: MetadataImage) -> tuple[list[dict[str, Any]], list[Any]]:
        pairs = Counter([(d.name, d.mechanism) for d in req.deletions]
                        + [(u.name, u.mechanism) for u in req.upsertions])
        errors: dict[str, tuple[int, str]] = {}
        order: list[str] = []

        def err(user: str, code: int, msg: str) -> None:
            errors.setdefault(user, (code, msg))

        for d in req.deletions:
            order.append(d.name)
            if not d.name:
                err(d.name, UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
            elif d.mechanism not in MECHANISM_NAMES:
                err(d.name, UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
            elif pairs[(d.name, d.mechanism)] > 1:
                err(d.name, DUPLICATE_RESOURCE,
                    "A user credential cannot be altered twice in the same request")
            elif (d.name, d.mechanism) not in image.scram_credentials:
                err(d.name, RESOURCE_NOT_FOUND,
                    "Attempt to delete a user credential that does not exist")
        for u in req.upsertions:
            order.append(u.name)
            if not u.name:
                err(u.name, UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
            elif u.mechanism not in MECHANISM_NAMES:
                err(u.name, UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
            elif pairs[(u.name, u.mechanism)] > 1:
                err(u.name, DUPLICATE_RESOURCE,
                    "A user credential cannot be altered twice in the same request")
            elif u.iterations < MIN_ITERATIONS:
                err(u.name, UNACCEPTABLE_CREDENTIAL, "Too few iterations")
            elif u.iterations > MAX_ITERATIONS:
                err(u.name, UNACCEPTABLE_CREDENTIAL, "Too many iterations")
            elif not u.salt or not u.salted_password:
                err(u.name, UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty")
        records: list[Any] = []
        for d in req.deletions:
            if d.name not in errors:
                records.append(RemoveUserScramCredentialRecord(d.name, d.mechanism))
        for u in req.upsertions:
            if u.name not in errors:
                c = credential_from_salted(MECHANISM_NAMES[u.mechanism], bytes(u.salted_password),
                                           bytes(u.salt), u.iterations)
                records.append(UserScramCredentialRecord(u.name, u.mechanism, c.salt,
                                                         c.stored_key, c.server_key, c.iterations))
        results = []
        for user in dict.fromkeys(order):
            code, msg = errors.get(user, (0, None))  # type: ignore[arg-type]
            results.append({"user": user, "error_code": code, "error_message": msg})
        return results, records
    return run


async def alter_user_scram_credentials(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    if must_forward(broker, ctx):
        fwd = await forward(broker, ctx, _configs_settled(broker))
        if fwd is not None:
            return fwd
    c = broker.controller.local
    if c is None:
        users = dict.fromkeys([d.name for d in req.deletions] + [u.name for u in req.upsertions])
        return {"throttle_time": 0, "results": [
            {"user": u, "error_code": NOT_CONTROLLER,
             "error_message": "This node is not the active controller."} for u in users]}
    results = await c.alter_user_scram_credentials(_plan(req))
    return {"throttle_time": 0, "results": results}

"""Confluent Schema Registry's error answers: an HTTP status plus a five-digit error code."""

from __future__ import annotations


class RegistryError(Exception):
    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    def body(self) -> dict[str, object]:
        return {"error_code": self.code, "message": self.message}


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40401, f"Subject '{subject}' not found.")


def version_not_found(version: int | str) -> RegistryError:
    return RegistryError(404, 40402, f"Version {version} not found.")


def schema_not_found(schema_id: int | str | None = None) -> RegistryError:
    text = "Schema not found" if schema_id is None else f"Schema {schema_id} not found"
    return RegistryError(404, 40403, text)


def subject_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(404, 40404, f"Subject '{subject}' was soft deleted.Set permanent=true to delete "
                                     "permanently")


def subject_not_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(404, 40405, f"Subject '{subject}' was not deleted first before being deleted "
                                     "permanently")


def version_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(404, 40406, f"Subject '{subject}' Version {version} was soft deleted.Set "
                                     "permanent=true to delete permanently")


def version_not_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(404, 40407, f"Subject '{subject}' Version {version} was not deleted first before "
                                     "being deleted permanently")


def subject_config_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40408, f"Subject '{subject}' does not have subject-level compatibility "
                                     "configured")


def subject_mode_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40409, f"Subject '{subject}' does not have subject-level mode configured")


def incompatible(subject: str, messages: list[str]) -> RegistryError:
    details = "; ".join(messages[:20])
    return RegistryError(409, 409, f"Schema being registered is incompatible with an earlier schema for "
                                   f"subject \"{subject}\", details: [{details}]")


def invalid_schema(message: str) -> RegistryError:
    return RegistryError(422, 42201, f"Invalid schema: {message}")


def invalid_version(version: str) -> RegistryError:
    return RegistryError(422, 42202, f"The specified version '{version}' is not a valid version id. "
                                     "Allowed values are between [1, 2^31-1] and the string \"latest\"")


def invalid_compatibility(level: object) -> RegistryError:
    return RegistryError(422, 42203, f"Invalid compatibility level. Valid values are none, backward, "
                                     f"forward, full, backward_transitive, forward_transitive, and "
                                     f"full_transitive (got {level!r})")


def invalid_mode(mode: object) -> RegistryError:
    return RegistryError(422, 42204, f"Invalid mode. Valid values are READWRITE, READONLY, IMPORT "
                                     f"(got {mode!r})")


def not_permitted(message: str) -> RegistryError:
    return RegistryError(422, 42205, message)


def reference_exists(message: str) -> RegistryError:
    return RegistryError(422, 42206, message)


def unprocessable(message: str) -> RegistryError:
    return RegistryError(422, 422, message)


def bad_request(message: str) -> RegistryError:
    return RegistryError(400, 400, message)


def store_error(message: str) -> RegistryError:
    return RegistryError(500, 50001, f"Error in the backend data store: {message}")


def store_timeout(message: str) -> RegistryError:
    return RegistryError(500, 50002, f"Operation timed out: {message}")


def forwarding_error(message: str) -> RegistryError:
    return RegistryError(500, 50003, f"Error while forwarding the request to the leader: {message}")

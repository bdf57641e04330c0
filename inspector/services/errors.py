"""What a service or a selector refuses with, for a door to show: ServiceError, and two kinds of
it a door answers differently (HTTP 404 and 409; a command exits non-zero with any of them)."""

from __future__ import annotations


class ServiceError(Exception):
    """A request the platform refuses, with a message the user can act on."""


class NotFound(ServiceError):
    """What the request names does not exist (or is not where the request looks for it)."""


class Conflict(ServiceError):
    """Refused in the current state of what it names: an inspection still running, one that
    failed. `inspection`, when set, is the inspection in the way, for a door to show."""

    def __init__(self, message: str, *, inspection=None) -> None:
        super().__init__(message)
        self.inspection = inspection

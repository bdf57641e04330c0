"""What a service refuses with, for a door to show."""

from __future__ import annotations


class ServiceError(Exception):
    """A request the platform refuses, with a message the user can act on."""

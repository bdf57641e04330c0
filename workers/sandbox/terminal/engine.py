"""The local Docker engine as the terminal runs talk to it: the API client (ours unless one is
given), what a failing engine (or a connection to it) raises, and the tail kept of the text it
sends back (a build's log, a stage's output)."""

from __future__ import annotations

import docker
from docker.errors import DockerException
from requests.exceptions import RequestException
from urllib3.exceptions import HTTPError as UrllibError

from workers.sandbox.base import SandboxUnavailable

API_TIMEOUT = 60
# What a failing engine (or a connection to it) raises.
ENGINE_ERRORS = (DockerException, RequestException, UrllibError, OSError)


def connect(given=None):
    """The API client of `given` (a DockerClient, or an APIClient itself), else one of our own;
    SandboxUnavailable when the engine does not answer."""
    if given is None:
        try:
            return docker.from_env(timeout=API_TIMEOUT, max_pool_size=32).api
        except DockerException as exc:
            raise SandboxUnavailable(f"the Docker engine does not answer: {exc}") from None
    return getattr(given, "api", given)


def tail(text: str, limit: int) -> str:
    return text[-limit:] if len(text) > limit else text


__all__ = ["API_TIMEOUT", "ENGINE_ERRORS", "connect", "tail"]

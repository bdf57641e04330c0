"""What the import reads of an image the user already has, without running anything in it: whether
the local engine has it (never pulled), its work folder (WORKDIR), and files of the repository
there, read through the engine's archive API from a container that is created and never started
(labelled like the runs' containers, so a sweep removes one a crashed import left).

`ImageSnapshots` is used as a context manager: the containers it made are removed on leaving.
"""

from __future__ import annotations

import io
import logging
import os
import posixpath
import tarfile

from docker.errors import ImageNotFound, NotFound

from workers.sandbox.base import SandboxUnavailable
from workers.sandbox.terminal.containers import OWNERS
from workers.sandbox.terminal.engine import ENGINE_ERRORS, connect

logger = logging.getLogger(__name__)

MAX_FILE_BYTES = 64 << 20
MAX_LINK_HOPS = 4


class ImageSnapshots:
    """One import's look into images: `inspect(image)` and `read(image, path)`."""

    def __init__(self, client=None) -> None:
        self._given = client
        self._api = None
        self._containers: dict[str, str] = {}  # image -> the container its files are read from
        self._workdirs: dict[str, str] = {}

    def __enter__(self) -> ImageSnapshots:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def inspect(self, image: str) -> tuple[str, str]:
        """("" , the image's work folder) or (why it cannot be used, "")."""
        try:
            if self._api is None:
                self._api = connect(self._given)
            config = self._api.inspect_image(image).get("Config") or {}
        except SandboxUnavailable as exc:
            return f"the image {image} cannot be checked: {exc}", ""
        except ImageNotFound:
            return (
                f"no image {image} on this Docker engine; images are never pulled (load it "
                "with `docker load` or build it first)"
            ), ""
        except ENGINE_ERRORS as exc:
            return f"the image {image} cannot be checked: docker: {exc}", ""
        workdir = posixpath.normpath(config.get("WorkingDir") or "/")
        if workdir in ("/", "."):
            return (
                f"the image {image} has no WORKDIR: the runs work in the image's WORKDIR, where "
                "the repository must be"
            ), ""
        self._workdirs[image] = workdir
        return "", workdir

    def read(self, image: str, path: str) -> bytes | None:
        """A regular file of the image (an absolute path), links followed a few times; None
        when there is none (or it cannot be read)."""
        try:
            container = self._container(image)
            return self._fetch(container, path, 0)
        except ENGINE_ERRORS as exc:
            logger.warning("reading %s of image %s failed: %s", path, image, exc)
            return None

    def close(self) -> None:
        for container in self._containers.values():
            try:
                self._api.remove_container(container, force=True)
            except NotFound:
                pass
            except ENGINE_ERRORS as exc:
                logger.warning("could not remove snapshot container %s: %s", container[:12], exc)
        self._containers.clear()

    def _container(self, image: str) -> str:
        if image not in self._containers:
            created = self._api.create_container(
                image,
                command=["true"],
                network_disabled=True,
                labels=dict(OWNERS.for_process(os.getpid())),
            )
            self._containers[image] = created["Id"]
        return self._containers[image]

    def _fetch(self, container: str, path: str, hops: int) -> bytes | None:
        try:
            stream, stat = self._api.get_archive(container, path)
        except NotFound:
            return None
        if int((stat or {}).get("size") or 0) > MAX_FILE_BYTES:
            return None
        raw = io.BytesIO()
        for chunk in stream:
            raw.write(chunk)
            if raw.tell() > MAX_FILE_BYTES + (1 << 20):
                return None
        raw.seek(0)
        with tarfile.open(fileobj=raw) as archive:
            member = archive.next()
            if member is None:
                return None
            if member.issym() and hops < MAX_LINK_HOPS:
                target = posixpath.normpath(
                    posixpath.join(posixpath.dirname(path), member.linkname)
                )
                return self._fetch(container, target, hops + 1)
            if not member.isfile():
                return None
            handle = archive.extractfile(member)
            return handle.read() if handle is not None else b""


__all__ = ["MAX_FILE_BYTES", "ImageSnapshots"]

"""The images of terminal tasks: what a task's build context is, and the builds.

`ImageBuilder.image_for(source)` builds the task's image from its build context (in memory,
sent to the engine as a tar stream), tagged by a hash of that context, so an unchanged task is
built once per engine. Builds never pull and run with no network; a Dockerfile that would make
the engine fetch anything (`ADD <url>`, a `FROM` image not on the engine) is refused unbuilt
(dockerfile.py). A build that fails or passes
`build_timeout_sec` is remembered for `keep_failed_builds_seconds`, so the many runs of a broken
task do not rebuild it each time; concurrent calls for one context wait on one build. A task
without a Dockerfile names a `docker_image`, used only when it is already on the engine.
`ImageBuilder.workdir(tag)` is an image's WORKDIR, where the stages run.
"""

from __future__ import annotations

import hashlib
import io
import json
import posixpath
import socket
import threading
import time
from dataclasses import dataclass, replace

from docker.errors import ImageNotFound

from workers.sandbox.terminal.archives import tar
from workers.sandbox.terminal.dockerfile import refusal as dockerfile_refusal
from workers.sandbox.terminal.engine import ENGINE_ERRORS, tail
from workers.sandbox.terminal.source import file_bytes, file_mode, positive_number

TAG_REPOSITORY = "inspector-task"
CONTEXT_LABEL = "inspector.task-context"
BUILD_LOG_BYTES = 16 * 1024
DEFAULT_BUILD_TIMEOUT = 600.0


@dataclass(frozen=True)
class BuildResult:
    """What `image_for` says about a task's image. `sandbox_error` marks a failure of the
    engine (not of the task's Dockerfile): it is not remembered, and a retry may succeed."""

    ok: bool
    tag: str
    cached: bool
    seconds: float
    log: str
    reason: str
    sandbox_error: bool = False


def build_context(source: dict) -> tuple[dict[str, tuple[int, bytes]], str | None, str]:
    """The task's build context (relative path -> (mode, bytes)), the Dockerfile's path in it
    (None when the task has no Dockerfile) and a problem ("" when none)."""
    context = (source.get("build_context") or "").strip("/")
    dockerfile = (source.get("dockerfile") or "").strip("/")
    files = source.get("files") or {}
    prefix = context + "/" if context else ""
    chosen: dict[str, tuple[int, bytes]] = {}
    for path, entry in files.items():
        if prefix and not path.startswith(prefix):
            continue
        chosen[path[len(prefix) :]] = (file_mode(entry), file_bytes(entry))
    if not dockerfile or dockerfile not in files:
        return chosen, None, ""
    if prefix and not dockerfile.startswith(prefix):
        return chosen, None, f"the Dockerfile {dockerfile} is outside the build context {context}/"
    return chosen, dockerfile[len(prefix) :], ""


def context_hash(files: dict[str, tuple[int, bytes]], dockerfile: str) -> str:
    """SHA-256 of the build context (sorted paths, modes, bytes) and the Dockerfile's path."""
    digest = hashlib.sha256()
    for path in sorted(files):
        mode, data = files[path]
        digest.update(b"%s\0%o\0%d\0" % (path.encode("utf-8", "surrogateescape"), mode, len(data)))
        digest.update(data)
    digest.update(b"dockerfile\0" + dockerfile.encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


class ImageBuilder:
    """One process's builds: the build locks, the failed builds remembered and the WORKDIRs of
    our content-hashed tags. `settings` is the executor: its `build_network` and
    `keep_failed_builds_seconds` are read at each use."""

    def __init__(self, api, settings) -> None:
        self._api = api
        self._settings = settings
        self._lock = threading.Lock()
        self._build_locks: dict[str, threading.Lock] = {}
        self._failed: dict[str, tuple[float, BuildResult]] = {}
        self._images: dict[str, str] = {}  # tag -> WORKDIR, for our content-hashed tags

    def image_for(self, source: dict) -> BuildResult:
        """The task's image, built when its tag (a hash of the build context) is not on the
        engine; a failed build is remembered for keep_failed_builds_seconds."""
        start = time.monotonic()
        files, dockerfile, problem = build_context(source)
        if problem:
            return BuildResult(False, "", False, time.monotonic() - start, "", problem)
        if dockerfile is None:
            return self._prebuilt(source, start)
        digest = context_hash(files, dockerfile)
        tag = f"{TAG_REPOSITORY}:{digest[:16]}"
        with self._lock:
            lock = self._build_locks.setdefault(digest, threading.Lock())
        with lock:
            with self._lock:
                remembered = self._failed.get(digest)
            if (
                remembered
                and time.monotonic() - remembered[0] < self._settings.keep_failed_builds_seconds
            ):
                return replace(remembered[1], cached=True, seconds=time.monotonic() - start)
            try:
                self._api.inspect_image(tag)
                return BuildResult(True, tag, True, time.monotonic() - start, "", "")
            except ImageNotFound:
                pass
            except ENGINE_ERRORS as exc:
                return BuildResult(
                    False, tag, False, time.monotonic() - start, "", f"docker: {exc}", True
                )
            try:
                text = files[dockerfile][1].decode("utf-8", "replace")
                refused = dockerfile_refusal(text, self._image_exists)
            except ENGINE_ERRORS as exc:
                return BuildResult(
                    False, tag, False, time.monotonic() - start, "", f"docker: {exc}", True
                )
            timeout = positive_number(source.get("build_timeout_sec"), DEFAULT_BUILD_TIMEOUT)
            if refused:
                result = BuildResult(
                    False, tag, False, time.monotonic() - start, refused, f"refused: {refused}"
                )
            else:
                result = self._build(files, dockerfile, tag, digest, timeout, start)
            with self._lock:
                if result.ok:
                    self._failed.pop(digest, None)
                elif not result.sandbox_error:
                    now = time.monotonic()
                    for old in [
                        k
                        for k, (t, _) in self._failed.items()
                        if now - t > self._settings.keep_failed_builds_seconds
                    ]:
                        del self._failed[old]
                    self._failed[digest] = (now, result)
            return result

    def _image_exists(self, name: str) -> bool:
        try:
            self._api.inspect_image(name)
        except ImageNotFound:
            return False
        return True

    def _prebuilt(self, source: dict, start: float) -> BuildResult:
        image = source.get("docker_image")
        if not image:
            where = source.get("dockerfile") or "a Dockerfile"
            return BuildResult(
                False,
                "",
                False,
                time.monotonic() - start,
                "",
                f"the task has no Dockerfile ({where} is missing) and names no docker_image",
            )
        try:
            self._api.inspect_image(image)
        except ImageNotFound:
            return BuildResult(
                False,
                image,
                False,
                time.monotonic() - start,
                "",
                f"the task's docker_image {image} is not on this Docker engine and the task has "
                "no Dockerfile; images are never pulled (load it with `docker load` first)",
            )
        except ENGINE_ERRORS as exc:
            return BuildResult(
                False, image, False, time.monotonic() - start, "", f"docker: {exc}", True
            )
        return BuildResult(True, image, True, time.monotonic() - start, "", "")

    def _build(
        self,
        files: dict[str, tuple[int, bytes]],
        dockerfile: str,
        tag: str,
        digest: str,
        timeout: float,
        start: float,
    ) -> BuildResult:
        api = self._api
        context = tar([(path, data, mode) for path, (mode, data) in sorted(files.items())])
        params = {
            "t": tag,
            "dockerfile": dockerfile,
            "pull": False,
            "rm": True,
            "forcerm": True,
            "q": False,
            "nocache": False,
            "networkmode": self._settings.build_network,
            "labels": json.dumps({CONTEXT_LABEL: digest}),
        }
        log: list[str] = []
        size = 0
        error = ""
        state = {"cancelled": False, "socket": None}
        lock = threading.Lock()

        def cancel() -> None:
            with lock:
                state["cancelled"] = True
                sock = state["socket"]
            if sock is not None:  # closing our end makes the engine cancel the build
                try:
                    getattr(sock, "_sock", sock).shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

        timer = threading.Timer(timeout, cancel)
        timer.daemon = True
        timer.start()
        response = None
        try:
            # What APIClient.build does, keeping the response: its socket is what a timeout
            # shuts down. The read timeout covers the wait for the first answer.
            response = api._post(
                api._url("/build"),
                data=io.BytesIO(context),
                params=params,
                headers={"Content-Type": "application/x-tar"},
                stream=True,
                timeout=timeout + 5,
            )
            api._raise_for_status(response)
            with lock:
                state["socket"] = api._get_raw_response_socket(response)
                cancelled = state["cancelled"]
            if cancelled:
                cancel()
            for chunk in api._stream_helper(response, decode=True):
                if not isinstance(chunk, dict):
                    continue
                text = chunk.get("stream") or chunk.get("status") or ""
                if chunk.get("error"):
                    error = str(chunk["error"]).strip()
                    text = f"ERROR: {error}\n"
                if text:
                    log.append(text)
                    size += len(text)
                    if size > 4 * BUILD_LOG_BYTES:
                        joined = "".join(log)[-BUILD_LOG_BYTES:]
                        log, size = [joined], len(joined)
        except ENGINE_ERRORS as exc:
            if not state["cancelled"]:
                text = tail("".join(log), BUILD_LOG_BYTES)
                reason = f"docker: the build could not run: {exc}"
                return BuildResult(False, tag, False, time.monotonic() - start, text, reason, True)
        finally:
            timer.cancel()
            if response is not None:
                response.close()
        text = tail("".join(log), BUILD_LOG_BYTES)
        seconds = time.monotonic() - start
        if state["cancelled"]:
            return BuildResult(
                False, tag, False, seconds, text, f"the build passed its {timeout:g} s timeout"
            )
        if error:
            return BuildResult(False, tag, False, seconds, text, f"the build failed: {error}")
        try:
            api.inspect_image(tag)
        except ImageNotFound:
            return BuildResult(
                False, tag, False, seconds, text, "the build failed: it ended without an image"
            )
        except ENGINE_ERRORS as exc:
            return BuildResult(False, tag, False, seconds, text, f"docker: {exc}", True)
        return BuildResult(True, tag, False, seconds, text, "")

    def workdir(self, tag: str) -> str:
        with self._lock:
            known = self._images.get(tag)
        if known is not None:
            return known
        config = self._api.inspect_image(tag).get("Config") or {}
        workdir = posixpath.normpath(config.get("WorkingDir") or "/")
        if workdir.startswith("//"):
            workdir = "/" + workdir.lstrip("/")
        if tag.startswith(TAG_REPOSITORY + ":"):  # content-addressed: never changes
            with self._lock:
                self._images[tag] = workdir
        return workdir


__all__ = [
    "BUILD_LOG_BYTES",
    "CONTEXT_LABEL",
    "DEFAULT_BUILD_TIMEOUT",
    "TAG_REPOSITORY",
    "BuildResult",
    "ImageBuilder",
    "build_context",
    "context_hash",
]

"""File downloads the pages and the API share: a streamed JSONL attachment."""

from __future__ import annotations

from collections.abc import Iterable

from django.http import StreamingHttpResponse

from inspector.formats.jsonl import jsonl_stream


def jsonl_download(objs: Iterable[dict], filename: str) -> StreamingHttpResponse:
    """One JSON object a line, written as it is read (a 100,000-task manifest never waits)."""
    response = StreamingHttpResponse(
        jsonl_stream(objs), content_type="application/jsonl; charset=utf-8"
    )
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response

"""File downloads the pages and the API share: a streamed JSONL attachment, a report table (CSV
streamed, Parquet whole), the headers that say which inspection an export comes from, and the
HTTP status of an export's refusal."""

from __future__ import annotations

from collections.abc import Iterable

from django.http import HttpResponse, StreamingHttpResponse

from inspector import selectors
from inspector.formats.jsonl import jsonl_stream
from inspector.services.errors import Conflict, NotFound, ServiceError


def refused_status(exc: ServiceError) -> int:
    """404: what it names does not exist; 409: not now (an inspection running, or failed);
    400: the request itself is wrong."""
    if isinstance(exc, NotFound):
        return 404
    if isinstance(exc, Conflict):
        return 409
    return 400


def export_headers(response: HttpResponse, source: selectors.ExportSource) -> HttpResponse:
    """Which inspection the file comes from, and the newer one still running if there is one:
    the lines carry the first too, but only the response can say the second."""
    response["X-Inspection-Id"] = str(source.inspection.pk)
    if source.newer is not None:
        response["X-Newer-Inspection-Id"] = str(source.newer.pk)
        response["X-Export-Note"] = source.newer_note()
    return response


def jsonl_download(
    objs: Iterable[dict], filename: str, source: selectors.ExportSource | None = None
) -> StreamingHttpResponse:
    """One JSON object a line, written as it is read (a 100,000-task manifest never waits)."""
    response = StreamingHttpResponse(
        jsonl_stream(objs), content_type="application/jsonl; charset=utf-8"
    )
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return export_headers(response, source) if source else response


def table_download(
    rows: Iterable[dict], fmt: str, filename: str, source: selectors.ExportSource | None = None
) -> HttpResponse:
    """Report rows as CSV (streamed as read) or Parquet (written whole)."""
    if fmt == "csv":
        response = StreamingHttpResponse(
            selectors.csv_stream(rows), content_type="text/csv; charset=utf-8"
        )
    else:
        response = HttpResponse(
            selectors.parquet_bytes(rows), content_type="application/vnd.apache.parquet"
        )
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return export_headers(response, source) if source else response

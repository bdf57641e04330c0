"""Inspections as the pages and the API show them."""

from __future__ import annotations

from inspector.models import Inspection, TaskSetVersion


def inspection_get(pk: int) -> Inspection | None:
    return Inspection.objects.select_related("version__taskset").filter(pk=pk).first()


def version_inspections(version: TaskSetVersion, *, limit: int = 20) -> list[Inspection]:
    """The version's latest inspections, newest first."""
    return list(version.inspections.order_by("-id")[:limit])

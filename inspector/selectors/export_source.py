"""Which finished inspection an export of a task set comes from, or why there is none: the
version's last finished inspection (naming a newer one still running), or the one the export is
pinned to. While a version has no finished inspection (one queued or running, never inspected,
or only failed), an export refuses instead of writing nothing."""

from __future__ import annotations

from dataclasses import dataclass

from inspector.models import Inspection, TaskSetVersion
from inspector.selectors.tasksets import taskset_latest_version, version_last_finished
from inspector.services.errors import Conflict, NotFound, ServiceError


def inspection_progress_text(inspection: Inspection) -> str:
    if inspection.is_preparing:
        return f"{inspection.status}, preparing its runs"
    return (
        f"{inspection.status}, {inspection.runs_done}/{inspection.runs_total} runs "
        f"({inspection.percent}%)"
    )


@dataclass(frozen=True)
class ExportSource:
    """The finished inspection an export of a version comes from. `current`: it is the version's
    last finished inspection, whose figures the tasks' own columns hold; `newer`: an inspection of
    the version started after it and not finished yet, for the export to name."""

    version: TaskSetVersion
    inspection: Inspection
    pinned: bool
    current: bool
    newer: Inspection | None = None

    @property
    def taskset(self) -> str:
        return self.version.taskset.name

    def filename(self, what: str, ext: str) -> str:
        return f"{self.taskset}-v{self.version.number}-inspection{self.inspection.pk}-{what}.{ext}"

    def describe(self) -> str:
        pinned = " (pinned)" if self.pinned else ""
        return f"{self.version} by inspection #{self.inspection.pk}{pinned}"

    def newer_note(self) -> str:
        """What a user pulling this export must know: a newer inspection is on its way."""
        if self.newer is None:
            return ""
        return (
            f"inspection #{self.newer.pk} of {self.version} is "
            f"{inspection_progress_text(self.newer)}: this export is from inspection "
            f"#{self.inspection.pk}, the last finished one. Export again once "
            f"#{self.newer.pk} has finished, or pin inspection {self.inspection.pk} to keep to "
            "this one."
        )


def _finished_ids(name: str) -> str:
    ids = Inspection.objects.filter(
        version__taskset__name=name, status=Inspection.FINISHED
    ).values_list("pk", flat=True)[:10]
    return ", ".join(f"#{pk}" for pk in ids) or "none yet"


def _whole_number(raw: int | str, what: str) -> int:
    if isinstance(raw, int):
        return raw
    text = str(raw).strip()
    # ASCII digits only: str.isdigit() also takes '²' and '①', which int() refuses.
    if not (text.isascii() and text.isdigit()) or len(text) > 12:
        raise ServiceError(f"{what} must be a whole number, not {raw!r}.")
    return int(text)


def export_source(
    *,
    taskset_name: str,
    inspection_id: int | str | None = None,
    version_number: int | str | None = None,
) -> ExportSource:
    """Which inspection an export of the task set comes from, or why there is none.

    Unpinned: the last finished inspection of the latest version (or of `version_number`),
    naming a newer one still running. Pinned (`inspection_id`): that inspection, which must be a
    finished inspection of this task set. Raises NotFound (no such set, version or inspection,
    or an inspection of another set), Conflict (nothing finished to export from, or a pinned
    inspection that is not finished) or ServiceError (an id that is not a number)."""
    latest = taskset_latest_version(name=taskset_name)
    version = latest
    if version_number not in (None, ""):
        number = _whole_number(version_number, "version")
        version = latest.taskset.versions.select_related("taskset").filter(number=number).first()
        if version is None:
            raise NotFound(
                f"Task set {taskset_name!r} has no version {number} "
                f"(its versions: 1 to {latest.number})."
            )
    if inspection_id not in (None, ""):
        source = _pinned_source(taskset_name, _whole_number(inspection_id, "inspection"))
        if version_number not in (None, "") and source.version.pk != version.pk:
            raise ServiceError(
                f"Inspection #{source.inspection.pk} is of {source.version}, not of {version}: "
                "name one of them, or both of the same version."
            )
        return source
    finished = version_last_finished(version)
    active = version.inspections.filter(status__in=Inspection.ACTIVE).order_by("-id").first()
    if finished is None:
        if active is not None:
            raise Conflict(
                f"{version} has no finished inspection to export from: inspection #{active.pk} "
                f"is {inspection_progress_text(active)}. Export again once it has finished.",
                inspection=active,
            )
        last = version.latest_inspection()
        if last is not None:  # every inspection of it failed
            raise Conflict(
                f"{version} has no finished inspection to export from: inspection #{last.pk} "
                f"failed ({last.error[:300] or 'no reason recorded'}). Inspect it again.",
                inspection=last,
            )
        raise Conflict(
            f"{version} has not been inspected yet, so none of its tasks is known to be clean. "
            "Inspect it first."
        )
    newer = active if active is not None and active.pk > finished.pk else None
    return ExportSource(
        version=version, inspection=finished, pinned=False, current=True, newer=newer
    )


def _pinned_source(name: str, pk: int) -> ExportSource:
    inspection = None
    if 0 < pk < 2**63:  # a bigger number is no row's id, and the database cannot compare it
        inspection = Inspection.objects.select_related("version__taskset").filter(pk=pk).first()
    if inspection is None:
        raise NotFound(
            f"No inspection #{pk}. Finished inspections of {name!r}: {_finished_ids(name)}."
        )
    version = inspection.version
    if version.taskset.name != name:
        raise NotFound(
            f"Inspection #{pk} is of {version}, not of task set {name!r}. Finished inspections "
            f"of {name!r}: {_finished_ids(name)}."
        )
    if inspection.status == Inspection.FAILED:
        raise Conflict(
            f"Inspection #{pk} of {version} failed "
            f"({inspection.error[:300] or 'no reason recorded'}): it left no verdicts to export. "
            f"Finished inspections of {name!r}: {_finished_ids(name)}.",
            inspection=inspection,
        )
    if inspection.status != Inspection.FINISHED:
        raise Conflict(
            f"Inspection #{pk} of {version} is {inspection_progress_text(inspection)}: only a "
            f"finished inspection can be exported. Finished inspections of {name!r}: "
            f"{_finished_ids(name)}.",
            inspection=inspection,
        )
    last = version_last_finished(version)
    return ExportSource(
        version=version, inspection=inspection, pinned=True, current=last.pk == inspection.pk
    )

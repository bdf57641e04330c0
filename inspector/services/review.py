"""The review queue: filtering and sorting tasks for reviewers, bulk actions on a selection or on
everything a filter matches, claims, and saved filters. Views and the API call these; they take
plain values and a user, and every change lands in the audit trail (ReviewEvent)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, fields

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.paginator import Paginator
from django.db import connection, transaction
from django.db.models import F, Q, QuerySet
from django.utils import timezone
from django.utils.functional import cached_property

from inspector.models import Flag, ReviewEvent, SavedFilter, Task, claim_lapse


class ReviewError(Exception):
    """A review action that cannot be done as asked; the message says why."""


# The queue's sort keys, as the URL names them, and the columns they order by (then by id).
SORTS = {
    "severity": ("-severity", "id"),
    "-severity": ("severity", "id"),
    "task": ("task_id", "id"),
    "-task": ("-task_id", "-id"),
    "samples": ("sample_pass_rate", "id"),
    "-samples": ("-sample_pass_rate", "-id"),
    "reference": ("reference_pass_rate", "id"),
    "-reference": ("-reference_pass_rate", "-id"),
}
REVIEW_STATES = ("pending", "reviewed", "unflagged")


@dataclass(frozen=True)
class QueueFilter:
    """What the queue shows. Every field is a plain string from the URL; empty means any."""

    flag: str = ""  # a flag code the task carries (open or confirmed)
    severity: str = ""  # the lowest combined severity shown ("60")
    domain: str = ""
    taskset: str = ""
    version: str = ""  # a version number of `taskset`; empty: each set's latest version
    status: str = ""  # active | quarantined
    review: str = ""  # pending (a flag awaits a decision) | reviewed | unflagged
    assignee: str = ""  # a username, "none" for unassigned
    q: str = ""  # free text in the task id or the prompt
    sort: str = "severity"
    all: str = ""  # "1": unflagged tasks too, whatever else the filter says

    # A free-text search counts its matches up to this many (KeysFirstPaginator).
    SEARCH_COUNT_CAP = 200

    @classmethod
    def from_query(cls, query) -> QueueFilter:
        """From a QueryDict or dict; unknown keys are ignored, values are trimmed."""
        values = {}
        for f in fields(cls):
            raw = query.get(f.name, "") if hasattr(query, "get") else ""
            values[f.name] = str(raw or "").strip()[:500]
        if values["sort"] not in SORTS:
            values["sort"] = "severity"
        return cls(**values)

    def as_query(self) -> dict[str, str]:
        """The non-default fields, for the URL."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name)}
        if out.get("sort") == "severity":
            del out["sort"]
        return out

    @property
    def shows_flagged_only(self) -> bool:
        """Without a status, review state, search or `all`, the queue lists flagged tasks only."""
        return not (self.status or self.review or self.q or self.flag or self.all == "1")


def queue_tasks(filters: QueueFilter, *, user=None) -> QuerySet[Task]:
    """The tasks `filters` matches, in its order. `user` resolves the assignee "me"."""
    tasks = Task.objects.all()
    if filters.taskset:
        tasks = tasks.filter(version__taskset__name=filters.taskset)
    if filters.taskset and filters.version.isdigit():
        tasks = tasks.filter(version__number=int(filters.version))
    else:
        tasks = tasks.filter(in_latest_version=True)
    if filters.flag:
        # open_flags lists the codes of the latest inspection's open and confirmed flags.
        code = filters.flag
        tasks = tasks.filter(
            Q(open_flags=code)
            | Q(open_flags__startswith=code + ",")
            | Q(open_flags__endswith="," + code)
            | Q(open_flags__contains="," + code + ","),
            severity__gt=0,
        )
    if filters.severity.isdigit():
        tasks = tasks.filter(severity__gte=int(filters.severity))
    elif filters.shows_flagged_only:
        tasks = tasks.filter(severity__gt=0)
    if filters.domain:
        tasks = tasks.filter(domain=filters.domain)
    if filters.status in (Task.ACTIVE, Task.QUARANTINED):
        tasks = tasks.filter(status=filters.status)
    if filters.review == "pending":
        tasks = tasks.filter(pending_review=True)
    elif filters.review == "reviewed":
        tasks = tasks.filter(pending_review=False, severity__gt=0)
    elif filters.review == "unflagged":
        tasks = tasks.filter(severity=0)
    if filters.assignee == "none":
        tasks = tasks.filter(assignee__isnull=True)
    elif filters.assignee == "me" and user is not None:
        tasks = tasks.filter(assignee=user)
    elif filters.assignee:
        tasks = tasks.filter(assignee__username=filters.assignee)
    if filters.q:
        tasks = tasks.filter(Q(task_id__icontains=filters.q) | Q(prompt__icontains=filters.q))
    return tasks.order_by(*SORTS[filters.sort])


# What a queue row shows: the wide columns (prompt, code, source) stay on disk.
QUEUE_COLUMNS = (
    "task_id",
    "version__number",
    "version__taskset__name",
    "domain",
    "status",
    "severity",
    "open_flags",
    "pending_review",
    "reference_pass_rate",
    "sample_pass_rate",
    "assignee__username",
    "claimed_by__username",
    "claimed_at",
)


class KeysFirstPaginator(Paginator):
    """Pages deep into a big queue cheaply: the page's ids first (an index-only scan in the
    queue's order), then only those rows, with their joins.

    With `count_cap`, counting stops there (`capped` is then True): a free-text search that
    matches most of 100,000 prompts would otherwise read them all just to count them."""

    def __init__(self, object_list, per_page, *, count_cap: int | None = None) -> None:
        super().__init__(object_list, per_page)
        self.count_cap = count_cap
        self.capped = False

    @cached_property
    def count(self) -> int:
        if self.count_cap is None:
            return self.object_list.count()
        found = self.object_list.order_by().values("pk")[: self.count_cap + 1].count()
        self.capped = found > self.count_cap
        return min(found, self.count_cap)

    def page(self, number):
        number = self.validate_number(number)
        bottom = (number - 1) * self.per_page
        ids_query = self.object_list.values_list("pk", flat=True)[bottom : bottom + self.per_page]
        with transaction.atomic():
            if self.capped and connection.vendor == "postgresql":
                # Many matches: walking the queue's own index in order finds a page of them at
                # once, but PostgreSQL underestimates how many a text search matches and reads
                # every trigram candidate instead (10x slower on 100,000 prompts).
                with connection.cursor() as cursor:
                    cursor.execute("SET LOCAL enable_bitmapscan = off")
            ids = list(ids_query)
        rows = {task.pk: task for task in self.object_list.order_by().filter(pk__in=ids)}
        return self._get_page([rows[pk] for pk in ids if pk in rows], number, self)


def queue_page_tasks(tasks: QuerySet[Task]) -> QuerySet[Task]:
    """`tasks` with only the columns a queue row shows (and the rows it joins)."""
    return tasks.select_related("version__taskset", "assignee", "claimed_by").only(*QUEUE_COLUMNS)


# --- Bulk actions ------------------------------------------------------------------------------

BULK_ACTIONS = ("quarantine", "release", "dismiss", "assign")


@dataclass(frozen=True)
class BulkResult:
    action: str
    matched: int
    changed: int
    skipped_claimed: int

    def describe(self) -> str:
        said = {
            "quarantine": "quarantined",
            "release": "released",
            "dismiss": "had their open flags dismissed",
            "assign": "assigned",
        }[self.action]
        text = f"{self.changed} of {self.matched} tasks {said}"
        if self.skipped_claimed:
            text += f"; {self.skipped_claimed} skipped: another reviewer is reviewing them"
        return text + "."


def bulk_apply(
    tasks: QuerySet[Task],
    *,
    action: str,
    by,
    reason: str = "",
    flag: str = "",
    assignee: str = "",
    expected: int | None = None,
) -> BulkResult:
    """Apply `action` to every task of `tasks`, in one transaction: all of them or none.

    quarantine needs a reason, dismiss a note (`reason`; it dismisses the open flags of the
    filter's `flag`, or all of a task's open flags), assign a username (empty: unassign).
    `expected` is the count the user was shown: when the filter now matches a different
    number, nothing is done and the error says so. Tasks another reviewer has claimed are
    skipped and counted."""
    if action not in BULK_ACTIONS:
        raise ReviewError(f"unknown bulk action {action!r}: one of {', '.join(BULK_ACTIONS)}")
    reason = reason.strip()
    if action == "quarantine" and not reason:
        raise ReviewError("A reason is required to quarantine tasks.")
    if action == "dismiss" and not reason:
        raise ReviewError("A note is required to dismiss flags: say why they are not defects.")
    target = None
    if action == "assign" and assignee:
        target = get_user_model().objects.filter(username=assignee).first()
        if target is None:
            raise ReviewError(f"no user named {assignee!r} to assign to")
    ids = list(tasks.order_by().values_list("pk", flat=True)[: settings.BULK_MAX_TASKS + 1])
    if len(ids) > settings.BULK_MAX_TASKS:
        raise ReviewError(
            f"the filter matches more than {settings.BULK_MAX_TASKS} tasks; narrow it first"
        )
    if expected is not None and expected != len(ids):
        raise ReviewError(
            f"the filter now matches {len(ids)} tasks, not the {expected} you were shown; "
            "nothing was changed: look again and retry"
        )
    lapse = claim_lapse()
    with transaction.atomic():
        locked = Task.objects.filter(pk__in=ids).select_for_update()
        held = (
            locked.filter(claimed_at__gt=lapse)
            .exclude(claimed_by=by)
            .exclude(claimed_by__isnull=True)
        )
        skipped = set(held.values_list("pk", flat=True))
        mine = [pk for pk in ids if pk not in skipped]
        changed = _bulk(action, mine, by=by, reason=reason, flag=flag, target=target)
    return BulkResult(
        action=action, matched=len(ids), changed=changed, skipped_claimed=len(skipped)
    )


def _task_update(action: str, reason: str, target) -> tuple[dict, dict, str, str]:
    """A bulk action that changes tasks (as Task.quarantine, release and assign do one at a
    time): which tasks it applies to, what it sets, and the action and note of each audit line."""
    if action == "quarantine":
        changes = {"status": Task.QUARANTINED, "quarantine_reason": reason}
        return {"status": Task.ACTIVE}, changes, ReviewEvent.QUARANTINE, reason
    if action == "release":
        changes = {"status": Task.ACTIVE, "quarantine_reason": ""}
        return {"status": Task.QUARANTINED}, changes, ReviewEvent.RELEASE, reason
    note = f"to {target.get_username()}" if target else "unassigned"
    return {}, {"assignee": target}, ReviewEvent.ASSIGN, note


def _bulk(action: str, ids: list[int], *, by, reason: str, flag: str, target) -> int:
    now = timezone.now()
    changed = 0
    for start in range(0, len(ids), 2000):
        chunk = ids[start : start + 2000]
        events: list[ReviewEvent] = []
        if action != "dismiss":
            only, changes, event, note = _task_update(action, reason, target)
            todo = list(Task.objects.filter(pk__in=chunk, **only).values_list("pk", flat=True))
            Task.objects.filter(pk__in=todo).update(**changes)
            events = [ReviewEvent(task_id=pk, actor=by, action=event, note=note) for pk in todo]
        else:
            # The open flags of each task's latest inspection.
            open_flags = Flag.objects.filter(
                task_id__in=chunk, status=Flag.OPEN, inspection_id=F("task__last_inspection_id")
            )
            if flag:
                open_flags = open_flags.filter(code=flag)
            pairs = list(open_flags.values_list("pk", "task_id"))
            Flag.objects.filter(pk__in=[pk for pk, _ in pairs]).update(
                status=Flag.DISMISSED, note=reason, reviewed_by=by, reviewed_at=now
            )
            events = [
                ReviewEvent(task_id=t, actor=by, action=ReviewEvent.DISMISS, flag_id=f, note=reason)
                for f, t in pairs
            ]
            todo = sorted({t for _, t in pairs})
            for task in Task.objects.filter(pk__in=todo).only("pk", "last_inspection"):
                task.refresh_open_flags()
        ReviewEvent.objects.bulk_create(events, batch_size=1000)
        changed += len(todo)
    return changed


# --- Saved filters ---------------------------------------------------------------------------


def filter_save(*, user, name: str, filters: QueueFilter) -> SavedFilter:
    from django.utils.http import urlencode

    name = name.strip()
    if not name:
        raise ReviewError("A saved filter needs a name.")
    saved, _ = SavedFilter.objects.update_or_create(
        user=user, name=name[:100], defaults={"query": urlencode(filters.as_query())}
    )
    return saved


# --- Exports -----------------------------------------------------------------------------------

REPORT_COLUMNS = (
    "taskset",
    "version",
    "task_id",
    "kind",
    "domain",
    "status",
    "flags",
    "severity",
    "pending_review",
    "assignee",
    "reference_pass_rate",
    "sample_pass_rate",
    "learnability",
    "survivor_share",
    "cluster_count",
    "runs",
    "content_hash",
)


def report_rows(tasks: QuerySet[Task]) -> Iterator[dict]:
    """One flat row per task (REPORT_COLUMNS), read in chunks: memory stays flat however many."""
    values = tasks.values_list(
        "version__taskset__name",
        "version__number",
        "task_id",
        "kind",
        "domain",
        "status",
        "open_flags",
        "severity",
        "pending_review",
        "assignee__username",
        "reference_pass_rate",
        "sample_pass_rate",
        "learnability",
        "survivor_share",
        "cluster_count",
        "runs_count",
        "content_hash",
    )
    for row in values.iterator(chunk_size=2000):
        line = dict(zip(REPORT_COLUMNS, row, strict=True))
        line["flags"] = line["flags"].replace(",", ";")
        line["assignee"] = line["assignee"] or ""
        yield line


class _Echo:
    def write(self, value: str) -> str:
        return value


def csv_stream(rows: Iterable[dict]) -> Iterator[str]:
    """CSV text, a header then one line per row, produced as it is read."""
    writer = csv.DictWriter(_Echo(), fieldnames=REPORT_COLUMNS)
    yield writer.writeheader()
    batch: list[str] = []
    for row in rows:
        batch.append(writer.writerow(row))
        if len(batch) >= 500:
            yield "".join(batch)
            batch = []
    if batch:
        yield "".join(batch)


def parquet_bytes(rows: Iterable[dict]) -> bytes:
    """The rows as one Parquet file (pandas and pyarrow). Parquet is written whole, so the
    rows are held in memory once: about 100 bytes a task."""
    import pandas as pd

    frame = pd.DataFrame.from_records(list(rows), columns=list(REPORT_COLUMNS))
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    return buffer.getvalue()

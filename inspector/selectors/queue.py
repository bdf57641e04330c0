"""The review queue as reviewers see it: the filter the URL carries, the tasks it matches in its
order, only the columns a row shows, and a paginator that pages deep into 100,000 tasks cheaply."""

from __future__ import annotations

from dataclasses import dataclass, fields

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.paginator import Paginator
from django.db import connection, transaction
from django.db.models import Case, CharField, Exists, OuterRef, Q, QuerySet, Value, When
from django.db.models.functions import Substr
from django.utils.functional import cached_property

from inspector.detect.codes import ADVISORY
from inspector.models import Flag, Task

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
    if filters.taskset and filters.version.isascii() and filters.version.isdigit():
        tasks = tasks.filter(version__number=int(filters.version))
    else:
        tasks = tasks.filter(in_latest_version=True)
    if filters.flag:
        code = filters.flag
        if code in ADVISORY and code not in settings.ADVISORY_FLAGS_THAT_BLOCK:
            # An advisory flag does not block, so open_flags leaves it out: ask the flags.
            tasks = tasks.filter(
                Exists(
                    Flag.objects.filter(
                        task_id=OuterRef("pk"),
                        inspection_id=OuterRef("last_inspection_id"),
                        code=code,
                        status__in=Flag.BLOCKING,
                    )
                )
            )
        else:
            # open_flags lists the codes of the latest inspection's open and confirmed flags.
            tasks = tasks.filter(
                Q(open_flags=code)
                | Q(open_flags__startswith=code + ",")
                | Q(open_flags__endswith="," + code)
                | Q(open_flags__contains="," + code + ","),
                severity__gt=0,
            )
    if filters.severity.isascii() and filters.severity.isdigit():
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
    "kind",
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


# An answer-graded task's row shows the start of its question: its id is often generated.
QUESTION_CHARS = 160


def queue_page_tasks(tasks: QuerySet[Task]) -> QuerySet[Task]:
    """`tasks` with only the columns a queue row shows (and the rows it joins); an answer task
    also gets `question` (the start of its question; empty for the other kinds)."""
    return (
        tasks.select_related("version__taskset", "assignee", "claimed_by")
        .only(*QUEUE_COLUMNS)
        .annotate(
            question=Case(
                When(kind=Task.ANSWER, then=Substr("prompt", 1, QUESTION_CHARS)),
                default=Value(""),
                output_field=CharField(),
            )
        )
    )


def queue_flag_lines(tasks) -> list[Task]:
    """The tasks of a queue page as a list, each with `flag_lines`: (code, explanation) of the
    open and confirmed flags of its latest inspection, the blocking ones first (in the order of
    its `open_flags`), then the advisory ones; one query in all."""
    tasks = list(tasks)
    latest = {task.pk: task.last_inspection_id for task in tasks}
    lines: dict[int, dict[str, str]] = {}
    for task_pk, inspection_pk, code, explanation in Flag.objects.filter(
        task_id__in=list(latest), status__in=Flag.BLOCKING
    ).values_list("task_id", "inspection_id", "code", "explanation"):
        if latest.get(task_pk) == inspection_pk:
            lines.setdefault(task_pk, {})[code] = explanation
    for task in tasks:
        mine = lines.get(task.pk, {})
        first = [code for code in task.open_flag_list if code in mine]  # the blocking ones
        task.flag_lines = [(code, mine[code]) for code in first + sorted(set(mine) - set(first))]
    return tasks


def reviewer_names(limit: int = 200) -> list[str]:
    """The usernames a task can be assigned to, for the queue's assign box."""
    return list(
        get_user_model()
        .objects.filter(is_active=True)
        .order_by("username")
        .values_list("username", flat=True)[:limit]
    )


def user_named(username: str):
    """The user of that username, or None."""
    return get_user_model().objects.filter(username=username).first()

"""Review actions on many tasks: bulk actions on a selection or on everything a queue filter
matches, and saved filters. (What the queue shows is a read: `inspector/selectors/queue.py`; one
task's claim, quarantine and flags are its model's methods.) Views and the API call these; they
take plain values and a user, and every change lands in the audit trail (ReviewEvent)."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import F, QuerySet
from django.utils import timezone

from inspector.models import Flag, ReviewEvent, SavedFilter, Task, claim_lapse
from inspector.selectors.queue import QueueFilter


class ReviewError(Exception):
    """A review action that cannot be done as asked; the message says why."""


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

"""Who may do what. Two groups: reviewers triage (claim, quarantine, release, dismiss and
confirm flags, assign, save filters); admins also upload, start inspections, export and manage
users (the Django admin). A superuser is an admin. Checked on the server for every request.

The admins group also carries the Django permissions its role needs in the Django admin
(`ADMIN_PERMISSIONS`: people and their groups, a read-only view of the inspector's records, and
revoking API tokens); `groups_ensure()` sets them after every `migrate`, so a fresh database
and an upgraded one agree. A member of the admins group may open the Django admin without being
staff (see inspector/admin.py)."""

from __future__ import annotations

import functools
from collections.abc import Callable

from django.core.exceptions import PermissionDenied

REVIEWERS = "reviewers"
ADMINS = "admins"

# (app label, model, actions) the admins group may take in the Django admin.
ADMIN_PERMISSIONS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("auth", "user", ("add", "change", "delete", "view")),
    ("auth", "group", ("view",)),
    ("inspector", "apitoken", ("view", "delete")),
    # A person's saved filters go with them when they are removed.
    ("inspector", "savedfilter", ("view", "delete")),
    *(
        ("inspector", model, ("view",))
        for model in (
            "taskset",
            "tasksetversion",
            "task",
            "sample",
            "inspection",
            "run",
            "flag",
            "reviewevent",
        )
    ),
)


def groups_ensure(**_kwargs) -> None:
    """Creates the two groups and gives the admins group exactly `ADMIN_PERMISSIONS`
    (a post_migrate receiver; idempotent). Permissions not yet created are skipped: they are
    made by the same signal, for the app that defines them, and the next call adds them."""
    from django.contrib.auth.models import Group, Permission

    Group.objects.get_or_create(name=REVIEWERS)
    admins, _ = Group.objects.get_or_create(name=ADMINS)
    wanted = [
        (app, f"{action}_{model}")
        for app, model, actions in ADMIN_PERMISSIONS
        for action in actions
    ]
    found = Permission.objects.filter(
        content_type__app_label__in={app for app, _ in wanted},
        codename__in={codename for _, codename in wanted},
    ).select_related("content_type")
    admins.permissions.set(
        [perm for perm in found if (perm.content_type.app_label, perm.codename) in set(wanted)]
    )


def _groups(user) -> set[str]:
    if not getattr(user, "is_authenticated", False):
        return set()
    cached = getattr(user, "_inspector_groups", None)
    if cached is None:
        cached = set(user.groups.values_list("name", flat=True))
        user._inspector_groups = cached
    return cached


def is_admin(user) -> bool:
    return bool(getattr(user, "is_superuser", False)) or ADMINS in _groups(user)


def is_reviewer(user) -> bool:
    return is_admin(user) or REVIEWERS in _groups(user)


def _required(check: Callable[[object], bool], role: str):
    def decorator(view):
        @functools.wraps(view)
        def wrapped(request, *args, **kwargs):
            if not check(request.user):
                raise PermissionDenied(f"This needs the {role} role.")
            return view(request, *args, **kwargs)

        return wrapped

    return decorator


reviewer_required = _required(is_reviewer, "reviewer")
admin_required = _required(is_admin, "admin")

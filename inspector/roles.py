"""Who may do what. Two groups: reviewers triage (claim, quarantine, release, dismiss and
confirm flags, assign, save filters); admins also upload, start inspections, export and manage
users (the Django admin). A superuser is an admin. Checked on the server for every request."""

from __future__ import annotations

import functools
from collections.abc import Callable

from django.core.exceptions import PermissionDenied

REVIEWERS = "reviewers"
ADMINS = "admins"


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

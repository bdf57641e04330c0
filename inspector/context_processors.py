"""Template context every page gets: the signed-in user's roles, to hide what they may not do
(the server refuses it anyway)."""

from __future__ import annotations

from inspector.roles import is_admin, is_reviewer


def roles(request) -> dict[str, bool]:
    user = getattr(request, "user", None)
    return {"role_admin": is_admin(user), "role_reviewer": is_reviewer(user)}

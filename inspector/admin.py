"""The Django admin: people and groups for the admins group, the inspector's records read-only.

Members of the admins group open it without being staff (`_admin_site_open`), and what they may
do there is the admins group's permissions (inspector.roles.ADMIN_PERMISSIONS). Only a
superuser may make a superuser or hand out single permissions."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.models import Group

from inspector.models import (
    ApiToken,
    Flag,
    Inspection,
    ReviewEvent,
    Run,
    Sample,
    SavedFilter,
    Task,
    TaskSet,
    TaskSetVersion,
)
from inspector.roles import ADMINS, REVIEWERS, is_admin


def _admin_site_open(request) -> bool:
    user = request.user
    return user.is_active and (user.is_staff or is_admin(user))


admin.site.has_permission = _admin_site_open
admin.site.site_header = "Environment inspector: administration"
admin.site.site_url = "/"

User = get_user_model()
admin.site.unregister(User)


@admin.register(User)
class PeopleAdmin(UserAdmin):
    """Django's user admin, where an admin who is not a superuser cannot raise anyone's powers
    beyond the two groups (is_superuser, is_staff and single permissions stay as they are)."""

    list_display = ("username", "email", "is_active", "group_names", "last_login")
    list_filter = ("is_active", "groups")

    @admin.display(description="groups")
    def group_names(self, user) -> str:
        return ", ".join(sorted(group.name for group in user.groups.all())) or "-"

    def get_queryset(self, request):
        return super().get_queryset(request).prefetch_related("groups")

    def get_readonly_fields(self, request, obj=None):
        fields = tuple(super().get_readonly_fields(request, obj))
        if request.user.is_superuser:
            return fields
        return (
            *fields,
            "is_superuser",
            "is_staff",
            "user_permissions",
            "last_login",
            "date_joined",
        )

    def has_change_permission(self, request, obj=None):
        # A non-superuser may not edit (or reset the password of) anyone with powers beyond
        # the two groups: signing in as them would be an escalation.
        if obj is not None and not request.user.is_superuser and _privileged(obj):
            return False
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None):
        if obj is not None and not request.user.is_superuser and _privileged(obj):
            return False
        return super().has_delete_permission(request, obj)

    def formfield_for_manytomany(self, db_field, request, **kwargs):
        # A non-superuser hands out the two roles only, never a group a superuser made.
        if db_field.name == "groups" and not request.user.is_superuser:
            kwargs["queryset"] = Group.objects.filter(name__in=(REVIEWERS, ADMINS))
        return super().formfield_for_manytomany(db_field, request, **kwargs)


def _privileged(user) -> bool:
    """Whether a user has powers beyond the two roles: a superuser, staff, single
    permissions, or a group other than reviewers and admins."""
    return (
        user.is_superuser
        or user.is_staff
        or user.user_permissions.exists()
        or user.groups.exclude(name__in=(REVIEWERS, ADMINS)).exists()
    )


class _RoleLoginForm(AdminAuthenticationForm):
    """The admin's login form, open to members of the admins group as the site is."""

    def confirm_login_allowed(self, user):
        if user.is_active and is_admin(user) and not user.is_staff:
            return
        super().confirm_login_allowed(user)


admin.site.login_form = _RoleLoginForm


@admin.register(TaskSet)
class TaskSetAdmin(admin.ModelAdmin):
    list_display = ("name", "created_at", "created_by")
    search_fields = ("name",)


@admin.register(TaskSetVersion)
class TaskSetVersionAdmin(admin.ModelAdmin):
    list_display = ("taskset", "number", "task_count", "sample_count", "created_at")
    list_select_related = ("taskset",)


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    list_display = ("task_id", "version", "status", "severity", "open_flags")
    list_filter = ("status",)
    search_fields = ("task_id",)
    list_select_related = ("version__taskset",)
    raw_id_fields = ("version", "last_inspection")


@admin.register(Sample)
class SampleAdmin(admin.ModelAdmin):
    list_display = ("task", "sample_id", "model")
    raw_id_fields = ("task",)


@admin.register(Inspection)
class InspectionAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "version",
        "status",
        "runs_done",
        "runs_total",
        "created_at",
        "prepared_at",
    )
    list_filter = ("status",)


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ("id", "inspection", "task", "kind", "repeat", "status", "outcome", "duration")
    list_filter = ("status", "outcome", "kind")
    raw_id_fields = ("inspection", "task", "sample")


@admin.register(Flag)
class FlagAdmin(admin.ModelAdmin):
    list_display = ("code", "task", "inspection", "severity", "status")
    list_filter = ("code", "status")
    raw_id_fields = ("task", "inspection", "reviewed_by")


@admin.register(ReviewEvent)
class ReviewEventAdmin(admin.ModelAdmin):
    list_display = ("created_at", "task", "actor", "action", "note")
    list_filter = ("action",)
    raw_id_fields = ("task", "flag", "actor")


@admin.register(SavedFilter)
class SavedFilterAdmin(admin.ModelAdmin):
    list_display = ("name", "user", "query", "created_at")
    list_filter = ("user",)


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    # The key itself is never stored; only its hash and first characters.
    list_display = ("name", "user", "prefix", "created_at", "last_used_at", "revoked_at")
    list_filter = ("user",)
    readonly_fields = ("prefix", "key_hash", "created_at", "last_used_at")

    def has_delete_permission(self, request, obj=None):
        # Revoking a superuser's token is the superuser's (or another superuser's) business.
        if obj is not None and obj.user.is_superuser and not request.user.is_superuser:
            return False
        return super().has_delete_permission(request, obj)

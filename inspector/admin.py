from __future__ import annotations

from django.contrib import admin

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
    list_display = ("id", "version", "status", "runs_done", "runs_total", "created_at")
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

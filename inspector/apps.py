from __future__ import annotations

from django.apps import AppConfig


class InspectorConfig(AppConfig):
    name = "inspector"
    verbose_name = "Environment inspection"
    default_auto_field = "django.db.models.BigAutoField"

from __future__ import annotations

from django.apps import AppConfig
from django.db.models.signals import post_migrate


class InspectorConfig(AppConfig):
    name = "inspector"
    verbose_name = "Environment inspection"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from inspector.roles import groups_ensure

        # After every migrate (the permissions themselves are made by the same signal).
        post_migrate.connect(groups_ensure, dispatch_uid="inspector.roles.groups_ensure")

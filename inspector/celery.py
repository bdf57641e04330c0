"""The Celery app `inspector`, as cookiecutter-django wires it: settings come from Django's."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "inspector.settings")

app = Celery("inspector")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["workers"])

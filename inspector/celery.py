"""The Celery app `inspector`, as cookiecutter-django wires it: settings come from Django's."""

from __future__ import annotations

import os

from celery import Celery
from kombu.transport import TRANSPORT_ALIASES

from workers.steps import Lifecycle

# The file-system broker with atomic message writes (workers/broker.py) instead of kombu's own.
TRANSPORT_ALIASES["filesystem"] = "workers.broker:Transport"

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "inspector.settings")

app = Celery("inspector")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["workers"])
# Every worker sweeps runs itself and stops in bounded time (workers/steps.py).
app.steps["worker"].add(Lifecycle)

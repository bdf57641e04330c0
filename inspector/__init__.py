"""The environment quality inspection platform: Django project and its app."""

from __future__ import annotations

from inspector.celery import app as celery_app

__all__ = ("celery_app",)

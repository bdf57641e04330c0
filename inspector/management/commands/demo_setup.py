from __future__ import annotations

from pathlib import Path

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand

from inspector import services
from inspector.models import TaskSet
from inspector.roles import ADMINS, REVIEWERS

DEMO_DIR = Path(__file__).resolve().parents[2] / "demo"


class Command(BaseCommand):
    help = (
        "Create the demo login (reviewer and admin) and load (and inspect) the demo task set once."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--username", default="reviewer", help="demo reviewer's username")
        parser.add_argument("--password", default="inspect-demo", help="demo reviewer's password")
        parser.add_argument("--no-inspect", action="store_true", help="load without inspecting")

    def handle(self, *args, **options) -> None:
        user, _ = get_user_model().objects.get_or_create(username=options["username"])
        user.set_password(options["password"])
        user.is_staff = True  # the demo login may open the Django admin to add people
        user.save()
        # The demo login does everything: triage (reviewers) and upload, inspect, export (admins).
        for name in (REVIEWERS, ADMINS):
            user.groups.add(Group.objects.get_or_create(name=name)[0])
        self.stdout.write(
            f"Demo login (reviewer and admin): username {options['username']!r}, "
            f"password {options['password']!r}"
        )
        if TaskSet.objects.filter(name="demo").exists():
            self.stdout.write("Demo task set already loaded.")
            return
        with (
            (DEMO_DIR / "tasks.jsonl").open("rb") as tasks,
            (DEMO_DIR / "samples.jsonl").open("rb") as samples,
        ):
            version = services.taskset_import(
                name="demo",
                tasks_file=tasks,
                tasks_name="demo/tasks.jsonl",
                samples_file=samples,
                samples_name="demo/samples.jsonl",
            )
        self.stdout.write(f"Loaded {version}: {version.task_count} tasks with planted defects.")
        if not options["no_inspect"]:
            inspection = services.inspection_start(version=version)
            self.stdout.write(
                f"Inspection #{inspection.pk} queued; the worker prepares its runs and runs "
                "them as soon as it starts."
            )

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from inspector import selectors, services
from inspector.models import ClaimedByOther
from inspector.roles import is_reviewer


class Command(BaseCommand):
    help = (
        "Put a new label on an answer-graded task of NAME's latest version, with a reason "
        "(audited; the manifest carries it)."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("name", help="task-set name")
        parser.add_argument("task_id", help="the task's id in the set")
        parser.add_argument("--label", required=True, help="the new label (the uploaded one: undo)")
        parser.add_argument("--reason", required=True, help="why the label is wrong (audited)")
        parser.add_argument(
            "--by", required=True, metavar="USERNAME", help="the reviewer the trail names"
        )
        parser.add_argument(
            "--taskset-version",
            type=int,
            metavar="N",
            help="a version of the set (default: the latest)",
        )

    def handle(self, *args, **options) -> None:
        user = selectors.user_named(options["by"])
        if user is None or not is_reviewer(user):
            raise CommandError(f"{options['by']!r} is not a reviewer: --by names who relabels.")
        try:
            version = selectors.taskset_latest_version(name=options["name"])
        except services.ServiceError as exc:
            raise CommandError(str(exc)) from None
        if options["taskset_version"] is not None and options["taskset_version"] != version.number:
            version = version.taskset.versions.filter(number=options["taskset_version"]).first()
            if version is None:
                raise CommandError(f"{options['name']} has no version {options['version']}.")
        task = selectors.task_named(version=version, task_id=options["task_id"])
        if task is None:
            raise CommandError(f"{version} has no task {options['task_id']!r}.")
        before = task.label
        try:
            task.relabel(by=user, label=options["label"], reason=options["reason"])
        except (ValueError, ClaimedByOther) as exc:
            raise CommandError(f"{task.task_id}: {exc}") from None
        self.stdout.write(
            f"{task.task_id} of {version}: label {before!r} -> {task.label!r}"
            + ("" if task.corrected_label else " (the uploaded label again)")
            + "; the manifest carries it, inspect again to verify the samples against it."
        )

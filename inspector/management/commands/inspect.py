from __future__ import annotations

import time

from django.core.management.base import BaseCommand, CommandError

from inspector import selectors, services
from inspector.models import Inspection


class Command(BaseCommand):
    help = "Start an inspection of NAME's latest version; --wait follows it to the end."

    def add_arguments(self, parser) -> None:
        parser.add_argument("name", help="task-set name")
        parser.add_argument(
            "--wait", action="store_true", help="show a progress bar and return when it finishes"
        )
        parser.add_argument(
            "--stall-seconds",
            type=float,
            default=120.0,
            help="with --wait: give up when no run finished this long and no worker answers",
        )

    def handle(self, *args, **options) -> None:
        try:
            version = selectors.taskset_latest_version(name=options["name"])
            if options["wait"] and not services.workers_alive():
                raise CommandError(
                    "No Celery worker answers on the configured broker, so the inspection would "
                    "never finish. Start one with `celery -A inspector worker` (or bin/up) and "
                    "try again."
                )
            inspection = services.inspection_start(version=version)
        except services.ServiceError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"Inspection #{inspection.pk} of {version} queued: a worker is preparing its runs."
        )
        if options["wait"]:
            self._follow(inspection, stall_seconds=options["stall_seconds"])

    def _follow(self, inspection: Inspection, *, stall_seconds: float) -> None:
        last_seen, last_change = None, time.monotonic()
        while True:
            inspection.refresh_from_db()
            seen = (inspection.is_preparing, inspection.runs_done)
            if seen != last_seen:
                if last_seen is not None and last_seen[0] and not inspection.is_preparing:
                    self.stdout.write(f"\n{inspection.runs_total} sandbox runs queued.")
                last_seen, last_change = seen, time.monotonic()
                self._bar(inspection)
            if inspection.status == Inspection.FINISHED:
                break
            if inspection.status == Inspection.FAILED:
                raise CommandError(f"Inspection #{inspection.pk} failed: {inspection.error}")
            if time.monotonic() - last_change > stall_seconds:
                if not services.workers_alive():
                    raise CommandError(
                        f"Inspection #{inspection.pk} has made no progress for {stall_seconds:.0f} s "
                        "and no Celery worker answers; start one with `celery -A inspector worker`, "
                        "the inspection resumes where it stopped."
                    )
                last_change = time.monotonic()
            time.sleep(0.1)
        self._bar(inspection)
        self.stdout.write("")
        flags = inspection.flags.values_list("code", flat=True)
        counts: dict[str, int] = {}
        for code in flags:
            counts[code] = counts.get(code, 0) + 1
        summary = ", ".join(f"{n} {code}" for code, n in sorted(counts.items())) or "no flags"
        seconds = (inspection.finished_at - inspection.created_at).total_seconds()
        self.stdout.write(
            f"Inspection #{inspection.pk} finished in {seconds:.1f} s: "
            f"{inspection.runs_total} runs, {summary}."
        )
        for finding in inspection.findings:
            self.stdout.write(f"Harness finding: {finding['explanation']}.")

    def _bar(self, inspection: Inspection) -> None:
        width = 40
        if inspection.is_preparing:
            self.stdout.write(f"\r[{'.' * width}] preparing the runs (queued)   ", ending="")
            self.stdout.flush()
            return
        filled = int(width * inspection.percent / 100)
        line = (
            f"\r[{'#' * filled}{'.' * (width - filled)}] {inspection.runs_done}/"
            f"{inspection.runs_total} runs ({inspection.percent}%) {inspection.status}"
            f"{', ' + left if (left := inspection.progress()['left']) else ''}   "
        )
        self.stdout.write(line, ending="")
        self.stdout.flush()

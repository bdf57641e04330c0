from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from inspector import selectors, services
from inspector.formats.jsonl import write_jsonl


class Command(BaseCommand):
    help = "Write one JSONL line per task of NAME's latest version: flags, status and stats."

    def add_arguments(self, parser) -> None:
        parser.add_argument("name", help="task-set name")
        parser.add_argument("-o", "--output", required=True, help="file to write ('-' for stdout)")

    def handle(self, *args, **options) -> None:
        try:
            lines = selectors.report_lines(taskset_name=options["name"])
            count = write_jsonl(lines, options["output"], stdout=self.stdout)
        except services.ServiceError as exc:
            raise CommandError(str(exc)) from None
        except OSError as exc:
            raise CommandError(f"{options['output']}: {exc.strerror}") from None
        self.stderr.write(f"Wrote {count} task lines to {options['output']}.")

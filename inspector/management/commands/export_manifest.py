from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from inspector import selectors, services
from inspector.formats.jsonl import write_jsonl


class Command(BaseCommand):
    help = (
        "Write the clean tasks of NAME's latest version, by its last finished inspection (or "
        "--inspection N), as a JSONL training manifest."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("name", help="task-set name")
        parser.add_argument("-o", "--output", required=True, help="file to write ('-' for stdout)")
        parser.add_argument(
            "--inspection",
            type=int,
            metavar="N",
            help="pin the manifest to finished inspection N of the set (default: the latest "
            "version's last finished inspection)",
        )

    def handle(self, *args, **options) -> None:
        write_export(self, options, selectors.manifest_lines, "clean tasks")


def write_export(command: BaseCommand, options: dict, lines_of, what: str) -> None:
    """Resolve the export's inspection (refusing with the reason), write the lines, and say on
    stderr what was written from which inspection, and any newer inspection still running."""
    try:
        source = selectors.export_source(
            taskset_name=options["name"], inspection_id=options["inspection"]
        )
        count = write_jsonl(lines_of(source=source), options["output"], stdout=command.stdout)
    except services.ServiceError as exc:
        raise CommandError(str(exc)) from None
    except OSError as exc:
        raise CommandError(f"{options['output']}: {exc.strerror}") from None
    command.stderr.write(f"Wrote {count} {what} of {source.describe()} to {options['output']}.")
    if source.newer is not None:
        command.stderr.write(f"Note: {source.newer_note()}")

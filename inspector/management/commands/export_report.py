from __future__ import annotations

from django.core.management.base import BaseCommand

from inspector import selectors
from inspector.management.commands.export_manifest import write_export


class Command(BaseCommand):
    help = (
        "Write one JSONL line per task of NAME's latest version (flags, status and stats), by "
        "its last finished inspection (or --inspection N)."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("name", help="task-set name")
        parser.add_argument("-o", "--output", required=True, help="file to write ('-' for stdout)")
        parser.add_argument(
            "--inspection",
            type=int,
            metavar="N",
            help="pin the report to finished inspection N of the set (default: the latest "
            "version's last finished inspection)",
        )

    def handle(self, *args, **options) -> None:
        write_export(self, options, selectors.report_lines, "task lines")

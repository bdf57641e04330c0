"""The import boundaries ARCHITECTURE.md draws, read from the source (every import statement,
those inside functions too): a part that must not touch the ORM never imports Django, and only
`inspector/enqueue.py` names the Celery tasks, and the selectors (reads) call no service."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Take plain data, never the ORM (and so never Django).
PLAIN_DATA_PARTS = ["inspector/detect", "inspector/formats", "workers/sandbox"]
ENQUEUE = "inspector/enqueue.py"
# The planted-defect benchmark, a package of its own: its modules share public names only.
PLANTED = "bench/planted"


def imported_modules(path: Path, root: Path = ROOT) -> list[tuple[int, str]]:
    """(line, module) for every import in the file; `from . import x` resolved to the package."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = ".".join(path.relative_to(root).with_suffix("").parts[:-1])
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            found.append((node.lineno, module))
            found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
    return found


def python_files(part: str) -> list[Path]:
    return sorted((ROOT / part).rglob("*.py"))


def where(path: Path, line: int) -> str:
    return f"{path.relative_to(ROOT)}:{line}"


@pytest.mark.parametrize("part", PLAIN_DATA_PARTS)
def test_the_parts_that_take_plain_data_never_import_django(part):
    offending = [
        f"{where(path, line)} imports {module}"
        for path in python_files(part)
        for line, module in imported_modules(path)
        if module == "django" or module.startswith(("django.", "inspector.models"))
    ]
    assert python_files(part), f"{part} holds no Python files: the rule checks nothing"
    assert not offending, "\n".join(offending)


def test_only_the_enqueue_module_imports_the_celery_tasks():
    files = python_files("inspector") + python_files("workers")
    offending = [
        f"{where(path, line)} imports {module}"
        for path in files
        if path.relative_to(ROOT).as_posix() not in (ENQUEUE, "workers/tasks.py")
        for line, module in imported_modules(path)
        if module == "workers.tasks" or module.startswith("workers.tasks.")
    ]
    assert not offending, "\n".join(offending)
    assert any(module == "workers.tasks" for _, module in imported_modules(ROOT / ENQUEUE)), (
        "the enqueue module no longer imports the tasks: update this rule"
    )


def test_the_import_reader_sees_imports_inside_functions_and_relative_ones(tmp_path):
    # The rules above hold only if a lazy import, and a relative one, are found too.
    probe = tmp_path / "inspector" / "detect" / "probe.py"
    probe.parent.mkdir(parents=True)
    probe.write_text("def f():\n    from django.db import models\n    from ..models import Task\n")
    found = imported_modules(probe, root=tmp_path)
    assert (2, "django.db") in found
    assert (3, "inspector.models") in found


def test_no_module_imports_a_private_name_of_another():
    offending = [
        f"{where(path, line)} imports {module}"
        for path in python_files("inspector") + python_files("workers") + python_files(PLANTED)
        for line, module in imported_modules(path)
        if module.startswith(("inspector.", "workers.", "bench."))
        and module.rsplit(".", 1)[-1].startswith("_")
        and not module.rsplit(".", 1)[-1].startswith("__")
    ]
    assert not offending, "\n".join(offending)


def test_the_selectors_only_read_they_never_call_a_service_or_enqueue_work():
    # A read that started an inspection or queued runs would do so on every page view.
    allowed = ("inspector.services.errors",)
    offending = [
        f"{where(path, line)} imports {module}"
        for path in python_files("inspector/selectors")
        for line, module in imported_modules(path)
        if module.startswith(("inspector.services", "inspector.enqueue", "workers"))
        and not module.startswith(allowed)
    ]
    assert python_files("inspector/selectors"), "no selectors: the rule checks nothing"
    assert not offending, "\n".join(offending)


def test_the_readme_layout_names_every_package_of_the_tree():
    readme = (ROOT / "README.md").read_text()
    layout = readme.split("## Layout", 1)[1].split("```")[1]
    packages = [
        init.parent.relative_to(ROOT)
        for part in ("inspector", "workers", "bench")
        for init in (ROOT / part).rglob("__init__.py")
        if "migrations" not in init.parts
        and "templatetags" not in init.parts
        and "management" not in init.parts
        and init.parent != ROOT / part
    ]
    missing = [str(p) for p in packages if f"{p.name}/" not in layout]
    assert packages, "no packages found: the rule checks nothing"
    assert not missing, f"README's layout does not name: {', '.join(missing)}"

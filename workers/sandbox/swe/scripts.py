"""The bash scripts a repository run sends into its containers, and where they go.

Everything of ours lives in a folder outside the work folder (`/.inspector-swe-<nonce>`), so it
is never carried from the agent's container to the check's and never in the tests' way.

- `APPLY`: applies a patch the way the swebench harness does (`git apply --verbose`, then
  `git apply --verbose --reject`, then `patch --batch --fuzz=5 -p1 -i`), except that what a
  failed `--reject` applied is undone before `patch` tries (swebench leaves it, and `patch
  --batch` then takes the half-applied hunks for a reversed patch). The exit status says which
  way worked: 0 git apply, 10 git apply --reject, 11 patch, 1 none.
- `eval_script(...)`: the test stage. In the work folder: remove what the solution deleted
  (isolated mode), restore the test files (and, isolated, the test configuration files the
  solution touched) to the base commit's version, apply the test patch, remove .git (isolated),
  then run the test command with --junitxml on the listed tests' files that exist. Its own
  failures exit with 196 (none of the listed tests' files exists), 197 (no work folder), 198 (the
  test files could not be restored, or the test patch does not apply to them).
"""

from __future__ import annotations

import shlex

NO_TEST_FILES = 196
NO_WORKDIR = 197
RESTORE_FAILED = 198
APPLIED_BY = {0: "git apply", 10: "git apply --reject", 11: "patch --fuzz=5"}

APPLY = r"""
patch_file=$1 backup=$2
shift 2
existing=()
for f in "$@"; do
  if [ -e "$f" ] || [ -L "$f" ]; then existing+=("$f"); fi
done
tar -cf "$backup" --files-from /dev/null
if [ ${#existing[@]} -gt 0 ]; then tar -cf "$backup" -- "${existing[@]}"; fi
undo() {
  for f in "$@"; do rm -rf -- "$f" "$f.rej" "$f.orig"; done
  tar -xf "$backup"
}
echo ">>> git apply --verbose"
git apply --verbose -- "$patch_file" && exit 0
echo ">>> git apply --verbose --reject"
git apply --verbose --reject -- "$patch_file" && exit 10
undo "$@"
echo ">>> patch --batch --fuzz=5 -p1 -i"
patch --batch --fuzz=5 -p1 -i "$patch_file" && exit 11
undo "$@"
exit 1
"""


def _array(name: str, items: list[str]) -> str:
    return f"{name}=(" + " ".join(shlex.quote(i) for i in items) + ")"


def eval_script(
    *,
    workdir: str,
    base_commit: str,
    test_patch_path: str,
    junit_path: str,
    test_command: str,
    test_files: list[str],
    restore: list[str],
    deleted: list[str],
    remove_git: bool,
) -> str:
    """The test stage's script (see the module doc). `test_command` is the instance's own,
    written in as given, like the swebench harness's eval script does."""
    lines = [
        "set -u",
        f"cd -- {shlex.quote(workdir)} || {{ echo "
        f"{shlex.quote('inspector: no work folder ' + workdir)}; exit {NO_WORKDIR}; }}",
        f"base={shlex.quote(base_commit)}",
        _array("deleted", deleted),
        _array("restore", restore),
        _array("files", test_files),
        'for f in "${deleted[@]}"; do rm -rf -- "$f"; done',
        'for f in "${restore[@]}"; do',
        '  rm -rf -- "$f"',
        '  if git cat-file -e "$base:$f" 2>/dev/null; then',
        '    git checkout -q "$base" -- "$f" || {',
        f'      echo "inspector: cannot restore $f from $base"; exit {RESTORE_FAILED}; }}',
        "  fi",
        "done",
        # The test patch: when it does not apply, git's own words are the stage's output.
        f"if [ -s {shlex.quote(test_patch_path)} ]; then",
        f"  out=$(git apply --verbose -- {shlex.quote(test_patch_path)} 2>&1) || {{",
        f'    echo "inspector: the test patch does not apply"; echo "$out"; exit {RESTORE_FAILED}; }}',
        "fi",
    ]
    if remove_git:
        lines.append("rm -rf -- .git")
    lines += [
        "run=()",
        'for f in "${files[@]}"; do if [ -e "$f" ]; then run+=("$f"); fi; done',
        "if [ ${#run[@]} -eq 0 ]; then",
        f'  echo "inspector: none of the listed tests\' files exists"; exit {NO_TEST_FILES}',
        "fi",
        f"rm -f -- {shlex.quote(junit_path)}",
        f'{test_command} --junitxml={shlex.quote(junit_path)} "${{run[@]}}"',
    ]
    return "\n".join(lines) + "\n"


__all__ = [
    "APPLIED_BY",
    "APPLY",
    "NO_TEST_FILES",
    "NO_WORKDIR",
    "RESTORE_FAILED",
    "eval_script",
]

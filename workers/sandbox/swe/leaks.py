"""The leak scan: is the gold patch's result already in the repository the solution works in?

Agents read the fix out of the repository's own history (`git log --all`, the reflog, dangling
objects) when it is there. The scan looks for the gold patch's post-image, exactly: in a
container of the instance's image (the repository is untrusted data, so git runs there), the
files the gold changes are taken from the base commit, the gold applied to them outside the
repository, and each result hashed as a blob (`git hash-object`, nothing written). A blob that
the object store has (`git cat-file -e`) and that the base commit's own tree does not (an empty
file, say, proves nothing) is a leak. Then the commits that bring it (`git log --all --reflog
--find-object`, and the same from each unreachable commit `git fsck --unreachable` lists), and
where each is found: "reachable from <ref>" (HEAD or a ref; "packed-refs" when a ref holding it is
only in the packed-refs file), "reflog" (only a reflog entry names it), "dangling" (nothing
does).

`scan()` returns {"leak", "commits", "objects", "where", "files" (post-image path -> blob),
"commits_where" (commit -> its places), "reason", "seconds"}.
"""

from __future__ import annotations

import os
import posixpath
import time

from workers.sandbox.swe.patches import file_changes
from workers.sandbox.terminal.archives import folder_entries, tar
from workers.sandbox.terminal.engine import ENGINE_ERRORS
from workers.sandbox.terminal.stages import no_stage, run_stage

SCAN_TIMEOUT = 600.0
OUTPUT_BYTES = 512 * 1024

_SCAN = r"""
set -u
ours=$1 base=$2
shift 2
pre=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do pre+=("$1"); shift; done
shift
post_paths=("$@")
gitdir=$(git rev-parse --absolute-git-dir 2>/dev/null) || { echo "NO_REPOSITORY"; exit 0; }
git cat-file -e "$base^{commit}" 2>/dev/null || { echo "NO_BASE $base"; exit 0; }
post="$ours/post"
mkdir -p "$post"
for f in "${pre[@]}"; do
  if git cat-file -e "$base:$f" 2>/dev/null; then
    mkdir -p "$post/$(dirname -- "$f")"
    git cat-file blob "$base:$f" > "$post/$f"
  fi
done
out=$(cd "$post" && GIT_CEILING_DIRECTORIES=/ git apply --verbose -- "$ours/gold.patch" 2>&1) || {
  echo "APPLY_FAILED"; echo "$out" | tail -n 5; exit 0; }
base_blobs=$(git ls-tree -r "$base" | awk '{print $3}' | sort -u)
found=()
for f in "${post_paths[@]}"; do
  [ -f "$post/$f" ] || continue
  sha=$(git hash-object --no-filters -- "$post/$f")
  if grep -qx "$sha" <<<"$base_blobs"; then echo "SAME_AS_BASE $sha $f"; continue; fi
  if git cat-file -e "$sha" 2>/dev/null; then echo "OBJECT $sha $f"; found+=("$sha"); fi
done
[ ${#found[@]} -gt 0 ] || exit 0
unreachable=$(git fsck --unreachable --no-progress 2>/dev/null)
commits=$(
  for sha in "${found[@]}"; do
    git log --all --reflog --format=%H --find-object="$sha" 2>/dev/null
    for c in $(awk '$1=="unreachable" && $2=="commit" {print $3}' <<<"$unreachable"); do
      git log --format=%H --find-object="$sha" "$c" 2>/dev/null
    done
  done | sort -u)
for sha in "${found[@]}"; do
  if grep -q "^unreachable blob $sha" <<<"$unreachable"; then echo "DANGLING_BLOB $sha"; fi
done
reflog=$(git rev-list --reflog 2>/dev/null | sort -u)
for c in $commits; do
  echo "COMMIT $c"
  placed=0
  if git merge-base --is-ancestor "$c" HEAD 2>/dev/null; then echo "WHERE $c HEAD"; placed=1; fi
  for r in $(git for-each-ref --contains "$c" --format='%(refname)' 2>/dev/null); do
    echo "WHERE $c ref $r"; placed=1
    if [ ! -e "$gitdir/$r" ] && [ -f "$gitdir/packed-refs" ] && grep -q " $r\$" "$gitdir/packed-refs"; then
      echo "WHERE $c packed $r"
    fi
  done
  if [ $placed -eq 0 ]; then
    if grep -qx "$c" <<<"$reflog"; then echo "WHERE $c reflog"; else echo "WHERE $c dangling"; fi
  fi
done
"""


def _safe(path: str) -> bool:
    parts = path.split("/")
    return bool(path) and not path.startswith("/") and ".." not in parts and "" not in parts


class LeakScanner:
    """Scans instances' images through one process's client, images and run containers."""

    def __init__(self, api, images, run_containers, settings) -> None:
        self._api = api
        self._images = images
        self._run_containers = run_containers
        self._settings = settings

    def scan(self, source: dict, image_tag: str) -> dict:
        start = time.monotonic()
        result = {
            "leak": False,
            "commits": [],
            "objects": [],
            "where": [],
            "files": {},
            "commits_where": {},
            "reason": "",
            "seconds": 0.0,
            "stage": no_stage(),
        }
        containers: list[str] = []
        try:
            self._scan(source, image_tag, result, containers)
        except ENGINE_ERRORS as exc:
            result["reason"] = f"docker: {exc}"
        finally:
            for container_id in containers:
                self._run_containers.remove(container_id)
        result["seconds"] = round(time.monotonic() - start, 4)
        return result

    def _scan(self, source, image_tag, result, containers) -> None:
        gold = source.get("patch") or ""
        changes = file_changes(gold)
        pre = [old for old, _ in changes if _safe(old)]
        post = [new for _, new in changes if _safe(new)]
        if not post:
            result["reason"] = "the gold patch leaves no file to look for"
            return
        workdir = posixpath.normpath(source.get("workdir") or self._images.workdir(image_tag))
        ours = f"/.inspector-leak-{os.urandom(6).hex()}"
        files = [
            (f"{ours.lstrip('/')}/scan.sh", _SCAN.encode(), 0o755),
            (f"{ours.lstrip('/')}/gold.patch", gold.encode("utf-8", "surrogateescape"), 0o644),
        ]
        host_config = self._run_containers.host_config(source)
        container_id = self._run_containers.create(image_tag, host_config, containers)
        self._api.put_archive(container_id, "/", tar(folder_entries(ours) + files))
        self._api.start(container_id)
        base = source.get("base_commit") or "HEAD"
        command = ["bash", f"{ours}/scan.sh", ours, base, *pre, "--", *post]
        stage = run_stage(
            self._api,
            container_id,
            command,
            SCAN_TIMEOUT,
            f"{ours}/scan.log",
            workdir,
            env={},
            output_tail_bytes=OUTPUT_BYTES,
        )
        stage.pop("window")
        output = stage["output_tail"]
        result["stage"] = dict(stage, output_tail=output[-4096:])
        if stage["timed_out"]:
            result["reason"] = f"the scan passed its {SCAN_TIMEOUT:g} s"
            return
        _read(output, result, base)


def _read(output: str, result: dict, base: str) -> None:
    """Fills `result` from the scan's lines."""
    where: dict[str, None] = {}
    places: dict[str, list[str]] = {}
    lines = output.splitlines()
    for number, line in enumerate(lines):
        word, _, rest = line.partition(" ")
        if word == "NO_REPOSITORY":
            result["reason"] = "the work folder is not a git repository"
        elif word == "NO_BASE":
            result["reason"] = f"the repository has no base commit {base}"
        elif word == "APPLY_FAILED":
            detail = " ".join(lines[number + 1 : number + 3]).strip()
            result["reason"] = "the gold patch does not apply to the base commit's files" + (
                f": {detail}" if detail else ""
            )
        elif word == "OBJECT":
            sha, _, path = rest.partition(" ")
            result["objects"].append(sha)
            result["files"][path] = sha
        elif word == "DANGLING_BLOB":
            where["dangling"] = None
        elif word == "COMMIT":
            result["commits"].append(rest)
            places.setdefault(rest, [])
        elif word == "WHERE":
            commit, _, kind = rest.partition(" ")
            kind, _, ref = kind.partition(" ")
            text = {
                "HEAD": "reachable from HEAD",
                "ref": f"reachable from {ref}",
                "packed": "packed-refs",
                "reflog": "reflog",
                "dangling": "dangling",
            }.get(kind)
            if text:
                places.setdefault(commit, []).append(text)
                where[text] = None
    result["objects"] = list(dict.fromkeys(result["objects"]))
    result["commits_where"] = places
    result["where"] = list(where)
    result["leak"] = bool(result["objects"])


__all__ = ["SCAN_TIMEOUT", "LeakScanner"]

"""Unified diffs: parse, render, drop a hunk, apply (checked against real `git apply`)."""

import shutil
import subprocess

import pytest

from inspector.formats.unified_diff import (
    DiffError,
    PatchError,
    apply,
    drop_hunk,
    files_touched,
    hunks,
    parse,
    render,
)

CALC = "".join(f"line {n}\n" for n in range(1, 21))
TREE = {
    "pkg/calc.py": CALC,
    "pkg/old.py": "import os\nprint(os.name)\n",
}

DIFF = """\
diff --git a/pkg/calc.py b/pkg/calc.py
index 3b18e51..a1c2d3e 100644
--- a/pkg/calc.py
+++ b/pkg/calc.py
@@ -1,4 +1,5 @@
 line 1
+inserted after 1
 line 2
 line 3
 line 4
@@ -15,3 +16,3 @@ def later():
 line 15
-line 16
+line sixteen
 line 17
diff --git a/pkg/new.py b/pkg/new.py
new file mode 100644
index 0000000..e69de29
--- /dev/null
+++ b/pkg/new.py
@@ -0,0 +1,2 @@
+def f():
+    return 1
\\ No newline at end of file
diff --git a/pkg/old.py b/pkg/old.py
deleted file mode 100644
index 8c7e5a6..0000000
--- a/pkg/old.py
+++ /dev/null
@@ -1,2 +0,0 @@
-import os
-print(os.name)
"""


def test_a_multi_file_diff_renders_back_to_its_own_text_and_parses_the_same():
    files = parse(DIFF)
    assert render(files) == DIFF
    assert parse(render(files)) == files
    assert [(f.path, f.is_new, f.is_deleted) for f in files] == [
        ("pkg/calc.py", False, False),
        ("pkg/new.py", True, False),
        ("pkg/old.py", False, True),
    ]
    assert files_touched(files) == ["pkg/calc.py", "pkg/new.py", "pkg/old.py"]
    assert hunks(files)[1] == ("pkg/calc.py", "@@ -15,3 +16,3 @@ def later():")
    assert files[1].hunks[0].lines[-1] == "\\ No newline at end of file"


def test_applying_the_diff_changes_adds_and_deletes_files():
    out = apply(parse(DIFF), TREE)
    assert out["pkg/new.py"] == "def f():\n    return 1"
    assert "pkg/old.py" not in out
    assert "line sixteen\n" in out["pkg/calc.py"] and "inserted after 1\n" in out["pkg/calc.py"]


def test_dropping_a_hunk_gives_a_diff_that_applies_and_lacks_that_change():
    dropped = drop_hunk(parse(DIFF), 1)
    assert len(hunks(dropped)) == 3
    out = apply(parse(render(dropped)), TREE)
    assert "line 16\n" in out["pkg/calc.py"] and "line sixteen" not in out["pkg/calc.py"]
    assert "inserted after 1\n" in out["pkg/calc.py"]


def test_dropping_the_only_hunks_of_a_modified_file_drops_the_file():
    files = drop_hunk(drop_hunk(parse(DIFF), 0), 0)
    assert files_touched(files) == ["pkg/new.py", "pkg/old.py"]


def test_a_hunk_applies_at_an_offset_when_lines_moved():
    shifted = {**TREE, "pkg/calc.py": "header a\nheader b\nheader c\n" + CALC}
    out = apply(parse(DIFF), shifted)
    assert out["pkg/calc.py"].startswith("header a\nheader b\nheader c\nline 1\ninserted after 1\n")
    assert "line 15\nline sixteen\nline 17\n" in out["pkg/calc.py"]


def test_a_failing_hunk_names_its_file_and_hunk():
    changed = {**TREE, "pkg/calc.py": CALC.replace("line 16\n", "line XVI\n")}
    with pytest.raises(PatchError) as err:
        apply(parse(DIFF), changed)
    assert err.value.path == "pkg/calc.py"
    assert err.value.hunk_header == "@@ -15,3 +16,3 @@ def later():"
    assert "pkg/calc.py" in str(err.value) and "@@ -15,3" in str(err.value)


def test_a_new_file_over_an_existing_one_fails():
    with pytest.raises(PatchError, match="pkg/new.py.*already exists"):
        apply(parse(DIFF), {**TREE, "pkg/new.py": "x = 1\n"})


def test_a_deleted_file_must_exist():
    tree = {"pkg/calc.py": CALC}
    with pytest.raises(PatchError, match="pkg/old.py.*does not exist"):
        apply(parse(DIFF), tree)


def test_a_hunk_whose_counts_disagree_with_its_lines_names_the_line():
    bad = DIFF.replace("@@ -15,3 +16,3 @@", "@@ -15,4 +16,4 @@")
    with pytest.raises(DiffError) as err:
        parse(bad)
    assert err.value.line == 16  # the "diff --git" of the next file, read as a hunk line
    assert "diff --git a/pkg/new.py" in str(err.value)


def test_a_hunk_cut_short_names_the_line_of_its_header():
    with pytest.raises(DiffError, match="ends early") as err:
        parse("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n a\n-b\n")
    assert err.value.line == 4


def test_text_outside_any_file_names_the_line():
    with pytest.raises(DiffError) as err:
        parse("some words\n" + DIFF)
    assert err.value.line == 1
    with pytest.raises(DiffError) as err:
        parse("@@ -1 +1 @@\n-a\n+b\n")
    assert err.value.line == 1


def test_omitted_hunk_lengths_mean_one_line():
    files = parse("--- a/x\n+++ b/x\n@@ -2 +2 @@\n-b\n+B\n")
    h = files[0].hunks[0]
    assert (h.old_start, h.old_len, h.new_start, h.new_len) == (2, 1, 2, 1)
    assert apply(files, {"x": "a\nb\nc\n"}) == {"x": "a\nB\nc\n"}


def test_renames_and_binary_files_are_read():
    text = (
        "diff --git a/old name.py b/new name.py\nsimilarity index 100%\n"
        "rename from old name.py\nrename to new name.py\n"
        "diff --git a/img.png b/img.png\nindex 1..2 100644\nBinary files a/img.png and b/img.png differ\n"
    )
    files = parse(text)
    assert (files[0].old_path, files[0].new_path) == ("old name.py", "new name.py")
    assert files[1].is_binary and render(files) == text
    assert apply(files[:1], {"old name.py": "x\n"}) == {"new name.py": "x\n"}


OFFSET_TREE = {"a.txt": "zero\n" + CALC, "gone.txt": "bye\n"}
CROSS_DIFFS = [
    DIFF,
    # the hunk sits one line lower than stated: an offset
    "--- a/a.txt\n+++ b/a.txt\n@@ -9,3 +9,4 @@\n line 9\n line 10\n+between\n line 11\n",
    # no newline at the end, then one added; and a deletion
    "diff --git a/c.txt b/c.txt\n--- a/c.txt\n+++ b/c.txt\n@@ -1,2 +1,2 @@\n x\n-y\n\\ No newline at end of file\n+y\n"
    "diff --git a/gone.txt b/gone.txt\ndeleted file mode 100644\n--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n",
]


def _git_apply(tmp_path, tree, diff):
    repo = tmp_path / "repo"
    if repo.exists():
        shutil.rmtree(repo)
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    for path, text in tree.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    (repo / "d.patch").write_text(diff)
    subprocess.run(["git", "apply", "d.patch"], cwd=repo, check=True, capture_output=True)
    (repo / "d.patch").unlink()
    return {
        str(p.relative_to(repo)): p.read_text()
        for p in repo.rglob("*")
        if p.is_file() and ".git" not in p.relative_to(repo).parts
    }


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
@pytest.mark.parametrize("index", range(len(CROSS_DIFFS)))
def test_apply_gives_the_same_tree_as_git_apply(tmp_path, index):
    tree = [TREE, OFFSET_TREE, {"c.txt": "x\ny", "gone.txt": "bye\n"}][index]
    assert apply(parse(CROSS_DIFFS[index]), tree) == _git_apply(tmp_path, tree, CROSS_DIFFS[index])


# `git diff --binary` of a new 512-byte file, after a text change: git's base85 body.
BINARY_DIFF = (
    "diff --git a/a.txt b/a.txt\n"
    "--- a/a.txt\n"
    "+++ b/a.txt\n"
    "@@ -1 +1,2 @@\n"
    " x\n"
    "+y\n"
    "diff --git a/img.bin b/img.bin\n"
    "new file mode 100644\n"
    "index 0000000000000000000000000000000000000000..553a99f955221f149c3a4ee0df0b19c117d744bf\n"
    "GIT binary patch\n"
    "literal 512\n"
    "zcmZQzWMXDvWn<^y<l^Sx<>MC+6cQE@6%&_`l#-T_m6KOcR8m$^Ra4i{)Y8_`)zddH\n"
    "zG%_|ZH8Z!cw6eCbwX=6{baHlab#wRd^z!!c_45x13<?ej4GWKmjEatljf+o6OiE5k\n"
    "zO-s+n%*xKm&C4$+EGjN3Ei136tg5c5t*dWnY-(<4ZENr7?CS36?dzW~anj@|Q>RUz\n"
    "zF>}`JIdkXDU$Ah|;w4L$Enl&6)#^2C*R9{Mant54TeofBv2)k%J$v`<KXCBS;Uh<n\n"
    "z9Y1mM)af&4&z-+;@zUihSFc^aar4&gJ9qEhfAH|p<0ns_J%91?)$2EJ-@X6v@zduo\n"
    "VU%!3-@$=X3KY#!IXBgrB2LR)2{{a91\n"
    "\n"
    "literal 0\n"
    "HcmV?d00001\n"
    "\n"
)


def test_a_git_binary_patch_parses_renders_back_unchanged_and_its_text_changes_apply():
    files = parse(BINARY_DIFF)
    assert [(f.new_path, f.is_binary, len(f.hunks)) for f in files] == [
        ("a.txt", False, 1),
        ("img.bin", True, 0),
    ]
    assert render(files) == BINARY_DIFF
    text_only = [f for f in files if not f.is_binary]
    assert apply(text_only, {"a.txt": "x\n"}) == {"a.txt": "x\ny\n"}

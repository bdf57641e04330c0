"""A task's Dockerfile is read before it is built: nothing in it may make the engine fetch
anything (an `ADD <url>`, a base image that is not on the engine), whatever the build's network."""

from __future__ import annotations

import pytest

from workers.sandbox.terminal.dockerfile import instructions, refusal

LOCAL = {"inspector-sandbox:bookworm", "inspector-sandbox:bookworm-swe"}


def on_engine(name: str) -> bool:
    return name in LOCAL


def test_a_dockerfile_from_a_local_image_with_plain_steps_may_be_built():
    text = "FROM inspector-sandbox:bookworm\nWORKDIR /app\nCOPY . /app\nADD data.tar /app/\n"
    assert refusal(text, on_engine) == ""


@pytest.mark.parametrize(
    "line",
    [
        "ADD http://127.0.0.1:8000/secret /leak.txt",
        "ADD https://example.invalid/x.tar.gz /x",
        'ADD ["ftp://127.0.0.1/x", "/x"]',
        "ADD --chown=1:1 http://127.0.0.1/x /x",
        "ADD git@127.0.0.1:team/repo.git /repo",
        "ONBUILD ADD http://127.0.0.1/x /x",
    ],
)
def test_an_add_that_fetches_a_url_is_refused_with_its_line(line):
    problem = refusal(f"FROM inspector-sandbox:bookworm\n{line}\n", on_engine)
    assert problem.startswith("Dockerfile line 2, ADD fetches "), problem
    assert "build context" in problem


def test_a_base_image_missing_from_the_engine_is_refused_rather_than_pulled():
    problem = refusal("FROM 127.0.0.1:5000/evil/base:latest\nRUN true\n", on_engine)
    assert problem == (
        "Dockerfile line 1, FROM: the image 127.0.0.1:5000/evil/base:latest is not on this "
        "Docker engine, and builds never pull (load it with `docker load` first)"
    )


def test_copy_from_a_missing_image_is_refused_and_from_an_earlier_stage_is_not():
    stages = (
        "FROM inspector-sandbox:bookworm AS base\nRUN echo hi > /x\n"
        "FROM inspector-sandbox:bookworm-swe\nCOPY --from=base /x /x\nCOPY --from=0 /x /y\n"
    )
    assert refusal(stages, on_engine) == ""
    problem = refusal(
        "FROM inspector-sandbox:bookworm\nCOPY --from=registry.invalid/tools:1 /bin/x /x\n",
        on_engine,
    )
    assert problem.startswith("Dockerfile line 2, COPY --from: the image registry.invalid/tools:1")


def test_build_arguments_before_the_first_from_are_resolved_and_unknown_ones_refused():
    ok = "ARG BASE=inspector-sandbox:bookworm\nFROM ${BASE}\n"
    assert refusal(ok, on_engine) == ""
    assert refusal("FROM ${BASE:-inspector-sandbox:bookworm-swe}\n", on_engine) == ""
    problem = refusal("ARG BASE\nFROM $BASE\n", on_engine)
    assert "uses a build argument with no default" in problem
    missing = refusal("ARG TAG=latest\nFROM 127.0.0.1:5000/x:${TAG}\n", on_engine)
    assert "127.0.0.1:5000/x:latest is not on this Docker engine" in missing


def test_continuation_lines_comments_and_the_escape_directive_are_read_as_the_builder_does():
    text = (
        "# escape=`\n"
        "FROM inspector-sandbox:bookworm\n"
        "RUN echo a `\n"
        "# a comment inside\n"
        "    && echo b\n"
        "ADD `\n"
        "  http://127.0.0.1/x /x\n"
    )
    assert [(n, w) for n, w, _ in instructions(text)] == [(2, "FROM"), (3, "RUN"), (6, "ADD")]
    assert refusal(text, on_engine).startswith("Dockerfile line 6, ADD fetches http://127.0.0.1/x")

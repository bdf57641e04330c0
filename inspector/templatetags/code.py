"""Syntax highlighting for code shown on task pages (Pygments, server side: no script, no CDN).
Pygments escapes the text it is given, so uploaded code stays inert."""

from __future__ import annotations

import functools

from django import template
from django.utils.safestring import SafeString, mark_safe

register = template.Library()

MAX_HIGHLIGHTED = 200_000  # characters; longer text is shown plain (escaped)


@functools.cache
def _formatter():
    from pygments.formatters import HtmlFormatter

    return HtmlFormatter(nowrap=True, classprefix="hl-")


@functools.cache
def _lexer(language: str, filename: str):
    from pygments.lexers import TextLexer, get_lexer_by_name, get_lexer_for_filename
    from pygments.lexers.diff import DiffLexer
    from pygments.util import ClassNotFound

    try:
        if filename:
            lexer = get_lexer_for_filename(filename, stripnl=False, ensurenl=False)
        else:
            lexer = get_lexer_by_name(language or "text", stripnl=False, ensurenl=False)
    except ClassNotFound:
        if filename.rsplit("/", 1)[-1] == "Dockerfile":
            return get_lexer_by_name("docker", stripnl=False, ensurenl=False)
        return TextLexer(stripnl=False, ensurenl=False)
    if type(lexer) is DiffLexer:
        return _unified_diff_lexer()(stripnl=False, ensurenl=False)
    return lexer


@functools.cache
def _unified_diff_lexer() -> type:
    from pygments.lexer import RegexLexer, bygroups, default
    from pygments.token import Comment, Generic, Text, Whitespace

    class UnifiedDiffLexer(RegexLexer):
        """A unified diff read as one: the `---`/`+++` file header is a heading (Pygments' own
        diff lexer paints it as a removed and an added line), and inside a hunk a line is
        removed (-), added (+) or context (a space), nothing else; a line that is none of
        these (`diff --git`, a mutant diff's `...`) ends the hunk."""

        name = "Unified diff"
        tokens = {
            "root": [
                (r"((?:---|\+\+\+)(?: .*)?)(\n)", bygroups(Generic.Heading, Whitespace)),
                (r"(@@.*)(\n)", bygroups(Generic.Subheading, Whitespace), "hunk"),
                (r"(.*)(\n)", bygroups(Text, Whitespace)),
            ],
            "hunk": [
                (r"(@@.*)(\n)", bygroups(Generic.Subheading, Whitespace)),
                (r"(-.*)(\n)", bygroups(Generic.Deleted, Whitespace)),
                (r"(\+.*)(\n)", bygroups(Generic.Inserted, Whitespace)),
                (r"( .*|)(\n)", bygroups(Text, Whitespace)),
                (r"(\\.*)(\n)", bygroups(Comment, Whitespace)),  # \ No newline at end of file
                default("#pop"),
            ],
        }

    return UnifiedDiffLexer


def highlighted(text: str, *, language: str = "", filename: str = "") -> SafeString:
    from django.utils.html import escape
    from pygments import highlight

    if text is None:
        return mark_safe("")
    if len(text) > MAX_HIGHLIGHTED:
        return escape(text)
    # A lexer that reads line by line (a diff's) takes a last line without its newline for an
    # error: it gets one, and the page gets the text as it was.
    ended = text.endswith("\n")
    shown = highlight(text if ended else text + "\n", _lexer(language, filename), _formatter())
    if not ended:
        shown = shown.removesuffix("\n")
    # Pygments escapes &, <, >, " and ' in every token it writes.
    return mark_safe(shown)  # noqa: S308


@register.filter
def code(text: str, language: str = "python") -> SafeString:
    """`{{ task.prompt|code }}`, `{{ script|code:"bash" }}`."""
    return highlighted(text, language=language)


@register.filter
def code_file(text: str, filename: str) -> SafeString:
    """`{{ file.text|code_file:file.path }}`: the language from the file's name."""
    return highlighted(text, filename=filename)


@register.simple_tag
def code_styles() -> SafeString:
    """The highlighting's CSS, for the page's <style>."""
    return mark_safe(_formatter().get_style_defs("pre"))  # noqa: S308

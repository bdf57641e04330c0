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
    from pygments.util import ClassNotFound

    try:
        if filename:
            return get_lexer_for_filename(filename, stripnl=False, ensurenl=False)
        return get_lexer_by_name(language or "text", stripnl=False, ensurenl=False)
    except ClassNotFound:
        if filename.rsplit("/", 1)[-1] == "Dockerfile":
            return get_lexer_by_name("docker", stripnl=False, ensurenl=False)
        return TextLexer(stripnl=False, ensurenl=False)


def highlighted(text: str, *, language: str = "", filename: str = "") -> SafeString:
    from django.utils.html import escape
    from pygments import highlight

    if text is None:
        return mark_safe("")
    if len(text) > MAX_HIGHLIGHTED:
        return escape(text)
    # Pygments escapes &, <, >, " and ' in every token it writes.
    return mark_safe(highlight(text, _lexer(language, filename), _formatter()))  # noqa: S308


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

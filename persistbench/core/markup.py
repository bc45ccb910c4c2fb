"""The report's one rule for HTML: markup is made only here, and every other value is text.

Runs, summaries and results are shared and untrusted (docs/data-format.md,
threat model): a subset name, a metric key or a model name may hold
``<script>``. :func:`tag` escapes every child that is not :class:`Markup` and
every attribute value, so a value can only ever become text, in an element or
in a quoted attribute; :func:`join` and :func:`page` escape plain strings the
same way. Nothing else in the package writes HTML.
"""

from __future__ import annotations

import html

__all__ = ["Markup", "escape", "tag", "join", "page"]


class Markup(str):
    """HTML made by this module (already escaped); any other ``str`` is text."""


def escape(value: object) -> Markup:
    """``value`` as HTML text (``& < > " '`` escaped), or unchanged if it is already :class:`Markup`."""
    return value if isinstance(value, Markup) else Markup(html.escape(str(value), quote=True))


def join(*parts: object) -> Markup:
    """The parts one after the other, plain strings as text."""
    return Markup("".join(escape(p) for p in parts))


def tag(name: str, *children: object, **attrs: object) -> Markup:
    """``<name attrs>children</name>``; ``class_`` stands for ``class``, ``data_col`` for ``data-col``.

    Attributes whose value is ``None`` or ``False`` are left out, ``True``
    ones written bare. ``img``, ``meta`` and ``br`` have no children and no end tag.
    """
    if not name.isalnum():
        raise ValueError(f"not a tag name: {name!r}")
    out = [f"<{name}"]
    for key, value in attrs.items():
        if value is None or value is False:
            continue
        key = key.rstrip("_").replace("_", "-")
        out.append(f" {key}" if value is True else f' {key}="{escape(value)}"')
    out.append(">")
    if name in ("img", "meta", "br"):
        return Markup("".join(out))
    return Markup("".join(out) + join(*children) + f"</{name}>")


def page(title: str, css: str, body: list[object], script: str) -> Markup:
    """A whole HTML document: ``css`` and ``script`` are the package's own constants, ``body`` its parts."""
    head = tag("head", tag("meta", charset="utf-8"), tag("title", title), tag("style", Markup(css)))
    return Markup("<!DOCTYPE html>" + tag("html", head, tag("body", *body, tag("script", Markup(script))), lang="en"))

"""Markdown for the web pages: page bodies and search snippets rendered as HTML, never shown as raw syntax.

One markdown-it renderer (CommonMark and tables, raw HTML escaped) with one link rule for both: an absolute
http(s) URL stays a link, a relative link that names another page of the same corpus opens that page in the page
view, an anchor inside a page body stays; anything else (``javascript:``, ``data:``, a file the server does not
serve) keeps its text and loses its link. Images are never fetched: their alt text is shown, as a link when the
image is an http(s) URL.

A snippet is cut from the hit's chunk as markdown *blocks*, not characters: it starts at the first block that holds
a query term (what :func:`kwiki.index.snippets.make_snippet` centres on), stops after :data:`SNIPPET_CHARS` visible
characters, and every element it opens is closed, so a cut never leaves half a link or an unclosed code fence.

    >>> str(render_snippet("See [the guide](https://docs.nvidia.com/x) and `ldmatrix`.", ["guide"]))
    '<p>See <a href="https://docs.nvidia.com/x" rel="noopener noreferrer">the <mark>guide</mark></a> and <code>ldmatrix</code>.</p>\\n'
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.token import Token
from markupsafe import Markup, escape

#: Visible characters a snippet shows: the width of the API's own snippet (``make_snippet``'s 320).
SNIPPET_CHARS = 320
#: In a long first paragraph, the snippet starts this many characters before the first query term.
SNIPPET_LEAD = 80

#: Resolves a relative link of the rendered text to a page key (None: not a page of the index).
Resolver = Callable[[str], "str | None"]

_md = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")
# Every link becomes a token and the link rule below decides (markdown-it's own check would leave a refused
# ``[x](javascript:...)`` as raw markdown text).
_md.validateLink = lambda url: True  # type: ignore[method-assign]


def http_url(url: object) -> str:
    """``url`` when it is an absolute http(s) URL, else "": only those become links (a page's ``url:
    javascript:...`` would run in the reader's browser).

    >>> http_url("https://docs.nvidia.com/x"), http_url("javascript:alert(1)"), http_url(" JaVaScRiPt:x"), http_url("//evil")
    ('https://docs.nvidia.com/x', '', '', '')
    """
    if not isinstance(url, str):
        return ""
    text = url.strip()
    if any(c.isspace() or ord(c) < 32 for c in text):
        return ""
    scheme, sep, rest = text.partition("://")
    return text if sep and scheme.lower() in ("http", "https") and rest and not rest.startswith("/") else ""


def highlight(text: str, terms: Sequence[str]) -> Markup:
    """``text`` HTML-escaped, with each of ``terms`` (case-insensitive, whole words) in ``<mark>``."""
    words = sorted({t.strip() for t in terms if t and len(t.strip()) >= 2}, key=len, reverse=True)
    if not words:
        return Markup(escape(text))
    pattern = re.compile(r"(?<![\w])(" + "|".join(re.escape(w) for w in words) + r")(?![\w])", re.I)
    out, last = [], 0
    for m in pattern.finditer(text):
        out.append(str(escape(text[last:m.start()])))
        out.append(f"<mark>{escape(m.group(0))}</mark>")
        last = m.end()
    out.append(str(escape(text[last:])))
    return Markup("".join(out))


def _target(href: str, env: dict[str, Any]) -> str:
    """Where a link of the rendered text may point: an http(s) URL, a page view, an anchor of a page body; else ""."""
    if http_url(href):
        return href
    resolve: Resolver | None = env.get("kwiki_resolve")
    key = resolve(href.split("#")[0]) if resolve and not href.startswith("#") else None
    if key:
        return f"/ui/page/{key}"
    return href if env.get("kwiki_anchors") and re.fullmatch(r"#[\w.-]{1,200}", href) else ""


def _link_open(renderer: Any, tokens: list[Token], idx: int, options: Any, env: dict[str, Any]) -> str:
    token = tokens[idx]
    href = _target(str(token.attrGet("href") or ""), env)
    env.setdefault("kwiki_open_links", []).append(bool(href))
    if not href:
        return ""
    token.attrs = {"href": href}
    if http_url(href):
        token.attrs["rel"] = "noopener noreferrer"
    return str(renderer.renderToken(tokens, idx, options, env))


def _link_close(renderer: Any, tokens: list[Token], idx: int, options: Any, env: dict[str, Any]) -> str:
    opened = env.get("kwiki_open_links") or [False]
    return "</a>" if opened.pop() else ""


def _image(renderer: Any, tokens: list[Token], idx: int, options: Any, env: dict[str, Any]) -> str:
    token = tokens[idx]
    alt = escapeHtml(renderer.renderInlineAsText(token.children or [], options, env) or "image")
    src = http_url(str(token.attrGet("src") or ""))
    return f'<a href="{escapeHtml(src)}" rel="noopener noreferrer">[{alt}]</a>' if src else f"[{alt}]"


def _text(renderer: Any, tokens: list[Token], idx: int, options: Any, env: dict[str, Any]) -> str:
    terms = env.get("kwiki_terms")
    return str(highlight(tokens[idx].content, terms)) if terms else escapeHtml(tokens[idx].content)


def _snippet_heading(tag: str) -> Callable[..., str]:
    # A heading inside a snippet is a bold lead-in, not a page-sized <h2> in the middle of a result card.
    def rule(renderer: Any, tokens: list[Token], idx: int, options: Any, env: dict[str, Any]) -> str:
        if not env.get("kwiki_snippet"):
            return str(renderer.renderToken(tokens, idx, options, env))
        return '<p class="snippet-heading"><strong>' if tag == "open" else "</strong></p>\n"
    return rule


_md.add_render_rule("link_open", _link_open)
_md.add_render_rule("link_close", _link_close)
_md.add_render_rule("image", _image)
_md.add_render_rule("text", _text)
_md.add_render_rule("heading_open", _snippet_heading("open"))
_md.add_render_rule("heading_close", _snippet_heading("close"))


def render_markdown(text: str, resolve: Resolver | None = None) -> Markup:
    """A page body as HTML: raw HTML in the markdown is escaped, links follow the module's rule (``resolve`` maps
    the body's relative links, ``../techniques/stream-k.md``, to page keys)."""
    return Markup(_md.render(text, {"kwiki_resolve": resolve, "kwiki_anchors": True}))


def _blocks(tokens: list[Token]) -> list[list[Token]]:
    """The top-level blocks of a token stream (a paragraph, a list, a table, a fence), each with its closer."""
    out: list[list[Token]] = []
    depth = 0
    for t in tokens:
        if depth == 0:
            out.append([])
        out[-1].append(t)
        depth += t.nesting
    return out


def _visible(tokens: list[Token]) -> str:
    parts: list[str] = []
    for t in tokens:
        if t.type == "inline":
            parts.extend(c.content for c in t.children or [] if c.type in ("text", "code_inline"))
        elif t.type in ("fence", "code_block"):
            parts.append(t.content)
    return " ".join(parts)


def _from_item(block: list[Token], words: list[str]) -> list[Token]:
    """A list block from its first item that holds one of ``words`` (an ordered list keeps its numbering)."""
    items: list[list[Token]] = []
    for t in block[1:-1]:
        if t.type == "list_item_open" and t.level == 1:
            items.append([])
        if items:
            items[-1].append(t)
    first = next((i for i, it in enumerate(items) if any(w in _visible(it).lower() for w in words)), 0)
    if first == 0:
        return block
    if block[0].type == "ordered_list_open":
        block[0].attrs = {"start": int(block[0].attrGet("start") or 1) + first}
    return [block[0], *(t for it in items[first:] for t in it), block[-1]]


def _closer(opener: Token) -> Token:
    return Token(opener.type.replace("_open", "_close"), opener.tag, -1)


def _cut_text(text: str, budget: int) -> str:
    if len(text) <= budget:
        return text
    cut = text[:budget]
    space = cut.rfind(" ")
    if space <= budget // 2 and budget < 12:  # a word or two would be a stub ("h …"): an ellipsis says it better
        return "…"
    return (cut[:space] if space > budget // 2 else cut).rstrip() + " …"


def _trim_lead(inline: Token, terms: Sequence[str]) -> bool:
    """Drop the start of a long paragraph up to :data:`SNIPPET_LEAD` characters before the first query term, at a
    word of plain text or between whole links and emphases (never inside one); True when something was dropped."""
    children = inline.children or []
    words = [t.lower() for t in terms if len(t) >= 2]
    pos, depth, starts = 0, 0, []  # starts: (index, visible offset) of the children that begin at depth 0
    for i, c in enumerate(children):
        if depth == 0:
            starts.append((i, pos))
        found = [f for f in (c.content.lower().find(w) for w in words) if f >= 0] if c.type == "text" else []
        if found:
            target = pos + min(found) - SNIPPET_LEAD
            k, at = max((st for st in starts if st[1] <= target), default=(0, 0))
            if target <= 0 or (k == 0 and children[0].type != "text"):
                return False
            if children[k].type == "text":  # cut inside that text, at the next word
                text = children[k].content
                space = text.find(" ", target - at)
                children[k].content = text[space + 1:] if space >= 0 else text[target - at:]
            inline.children = [Token("text", "", 0, content="… ")] + children[k:]
            return True
        pos += len(c.content) if c.type in ("text", "code_inline") else 0
        depth += c.nesting
    return False


def _truncate_inline(inline: Token, budget: int) -> int:
    """Cut ``inline``'s children to ``budget`` visible characters, closing what they opened; returns what is left."""
    kept: list[Token] = []
    opened: list[Token] = []
    for c in inline.children or []:
        if c.type in ("text", "code_inline"):
            if budget <= 0:
                break
            if len(c.content) > budget:
                c.content = _cut_text(c.content, budget)
                budget = 0
            else:
                budget -= len(c.content)
        elif budget <= 0 and c.nesting >= 0:
            break
        kept.append(c)
        if c.nesting == 1:
            opened.append(c)
        elif c.nesting == -1 and opened:
            opened.pop()
    kept.extend(_closer(o) for o in reversed(opened))
    inline.children = kept
    return budget


def _truncate_block(block: list[Token], budget: int) -> tuple[list[Token], int]:
    """``block`` cut to ``budget`` visible characters with every element it opened closed; and what is left."""
    out: list[Token] = []
    opened: list[Token] = []
    for t in block:
        if budget <= 0 and t.nesting >= 0:
            break
        if t.type == "inline":
            budget = _truncate_inline(t, budget)
        elif t.type in ("fence", "code_block"):
            lines, kept = t.content.splitlines(), []
            for line in lines:
                if budget <= 0:
                    kept.append("…")
                    break
                kept.append(line[:budget])
                budget -= len(line) + 1
            t.content = "\n".join(kept) + "\n"
        out.append(t)
        if t.nesting == 1:
            opened.append(t)
        elif t.nesting == -1 and opened:
            opened.pop()
    out.extend(_closer(o) for o in reversed(opened))
    return out, budget


def render_snippet(chunk: str, terms: Sequence[str], resolve: Resolver | None = None, width: int = SNIPPET_CHARS) -> Markup:
    """A search hit's snippet as HTML: the blocks of ``chunk`` (markdown) from the first that holds one of ``terms``,
    up to ``width`` visible characters, with ``terms`` marked (see the module docstring)."""
    env: dict[str, Any] = {"kwiki_resolve": resolve, "kwiki_terms": list(terms), "kwiki_snippet": True}
    blocks = _blocks(_md.parse(chunk, env))
    words = [t.lower() for t in terms if len(t) >= 2]
    start = next((i for i, b in enumerate(blocks) if any(w in _visible(b).lower() for w in words)), 0)
    if blocks and blocks[start][0].type in ("bullet_list_open", "ordered_list_open"):
        blocks[start] = _from_item(blocks[start], words)
    first = blocks[start] if blocks else []
    if first and first[0].type == "paragraph_open" and len(first) > 1:
        if not _trim_lead(first[1], terms) and start:  # the snippet starts after the chunk's start: say so
            first[1].children = [Token("text", "", 0, content="… ")] + (first[1].children or [])
    tokens: list[Token] = []
    budget = width
    for block in blocks[start:]:
        if budget <= 0:
            break
        kept, budget = _truncate_block(block, budget)
        tokens.extend(kept)
    return Markup(_md.renderer.render(tokens, _md.options, env))

"""Heading- and code-fence-aware chunking with markdown-it-py.

Sections follow headings (a ``#`` inside a code fence is code, not a heading), code
fences stay whole, HTML comments and images are dropped, and long sections are split
on block (paragraph, list, table) boundaries so that a chunk fits the embedding
model's 256 word pieces::

    >>> parts = split_sections("# A\\ntext\\n```\\n# not a heading\\n```\\n", line_offset=1)
    >>> [(p.heading_path, p.kind) for p in parts]
    [(['A'], 'prose'), (['A'], 'code')]
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from markdown_it import MarkdownIt

CHUNKER_VERSION = "5"  # 5: sentences read from markdown-it paragraphs
#: Words per chunk; MiniLM truncates at 256 word pieces and technical prose runs ~1.5 pieces a word.
MAX_WORDS = 150
#: A fence longer than this many lines is cut on line boundaries (huge generated dumps).
MAX_FENCE_LINES = 400
#: Characters per chunk, whatever its words: a 7.8 MB paragraph of a few "words" was one chunk, and each search
#: that hit it spent 0.2 s on its snippet. 400 fence lines of 40 characters fit.
MAX_CHUNK_CHARS = 16_000

_md = MarkdownIt("commonmark").enable("table")
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)")
_WS = re.compile(r"[ \t]+")


@dataclass
class Block:
    text: str
    start: int  # 0-based line in the body, inclusive
    end: int  # exclusive
    code: bool = False


@dataclass
class Part:
    """A chunk before it gets ids: heading path, text and 1-based file lines."""

    heading_path: list[str]
    text: str
    line_start: int
    line_end: int
    kind: str = "prose"
    blocks: list[Block] = field(default_factory=list)


def _clean(text: str) -> str:
    text = _COMMENT.sub("", text)
    text = _IMAGE.sub("", text)
    lines = [_WS.sub(" ", ln).rstrip() for ln in text.split("\n")]
    return "\n".join(ln for ln in lines).strip()


def _words(text: str) -> int:
    return len(text.split())


def _blocks(body: str) -> list[tuple[str, int | None, Block]]:
    """Top-level blocks as (kind, heading level or None, block)."""
    lines = body.split("\n")
    tokens = _md.parse(body)
    out: list[tuple[str, int | None, Block]] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.level != 0 or tok.map is None or tok.type.endswith("_close"):
            i += 1
            continue
        start, end = tok.map
        if tok.type == "heading_open":
            title = _clean(tokens[i + 1].content) if i + 1 < len(tokens) else ""
            out.append(("heading", int(tok.tag[1]), Block(title, start, end)))
        elif tok.type in ("fence", "code_block"):
            out.append(("code", None, Block("\n".join(lines[start:end]).strip("\n"), start, end, code=True)))
        elif tok.type == "html_block":
            text = _clean(tok.content)
            if text:
                out.append(("prose", None, Block(text, start, end)))
        elif tok.type != "hr":
            text = _clean("\n".join(lines[start:end]))
            if text:
                out.append(("prose", None, Block(text, start, end)))
        i += 1
    return out


def _split_long(block: Block) -> list[Block]:
    """Cut one oversized block: fences on line boundaries, prose on lines, then on sentences."""
    lines = block.text.split("\n")
    if block.code:
        if len(lines) <= MAX_FENCE_LINES:
            return [block]
        segments = []
        for j in range(0, len(lines), MAX_FENCE_LINES):
            seg = lines[j : j + MAX_FENCE_LINES]
            segments.append(Block("\n".join(seg), block.start + j, block.start + j + len(seg), code=True))
        return segments
    if _words(block.text) <= MAX_WORDS:
        return [block]
    pieces: list[Block] = []
    buf: list[str] = []
    buf_start = block.start
    for j, line in enumerate(lines):
        units = [line] if _words(line) <= MAX_WORDS else re.split(r"(?<=[.!?])\s+", line)
        for unit in units:
            words = unit.split()
            start = 0
            while len(words) - start > MAX_WORDS:  # a single run-on sentence (stepped, not re-sliced: linear)
                pieces.append(Block(" ".join(words[start:start + MAX_WORDS]), block.start + j, block.start + j + 1))
                start += MAX_WORDS
            words = words[start:]
            unit = " ".join(words) if len(units) > 1 else unit
            if buf and _words("\n".join(buf)) + len(words) > MAX_WORDS:
                pieces.append(Block("\n".join(buf), buf_start, block.start + j + 1))
                buf, buf_start = [], block.start + j
            if unit.strip():
                buf.append(unit)
    if buf:
        pieces.append(Block("\n".join(buf), buf_start, block.end))
    return pieces


def split_sections(body: str, line_offset: int = 1) -> list[Part]:
    """Chunk a markdown body; ``line_offset`` is the file line where the body starts."""
    parts: list[Part] = []
    path: list[tuple[int, str]] = []
    current: list[Block] = []

    def flush() -> None:
        if not current:
            return
        heading = [t for _, t in path]
        buf: list[Block] = []
        for blk in [p for b in current for p in _split_long(b)]:
            size = sum(_words(b.text) for b in buf)
            if buf and (blk.code or buf[-1].code or size + _words(blk.text) > MAX_WORDS):
                parts.append(_part(heading, buf, line_offset))
                buf = []
            buf.append(blk)
        if buf:
            parts.append(_part(heading, buf, line_offset))
        current.clear()

    for kind, level, block in _blocks(body):
        if kind == "heading":
            flush()
            while path and path[-1][0] >= (level or 1):
                path.pop()
            path.append((level or 1, block.text))
        else:
            current.append(block)
    flush()
    return [piece for part in _pack(parts) for piece in _cut_chars(part)]


def _cut_chars(part: Part) -> list[Part]:
    """``part`` in pieces of at most :data:`MAX_CHUNK_CHARS`, cut at the last whitespace before the limit."""
    if len(part.text) <= MAX_CHUNK_CHARS:
        return [part]
    pieces, text = [], part.text
    while text:
        cut = len(text) if len(text) <= MAX_CHUNK_CHARS else text.rfind(" ", MAX_CHUNK_CHARS // 2, MAX_CHUNK_CHARS)
        cut = MAX_CHUNK_CHARS if cut <= 0 else cut
        pieces.append(Part(list(part.heading_path), text[:cut].strip(), part.line_start, part.line_end, part.kind))
        text = text[cut:].lstrip()
    return [p for p in pieces if p.text]


def _pack(parts: list[Part]) -> list[Part]:
    """Merge runs of small neighbouring prose sections (PR pages are mostly three-line sections).

    Fewer, fuller chunks embed faster and give the model more context; the merged sections keep
    their headings inline so BM25 still sees them.
    """
    out: list[Part] = []
    for part in parts:
        prev = out[-1] if out else None
        if (
            prev is not None
            and prev.kind == "prose"
            and part.kind == "prose"
            and _words(prev.text) + _words(part.text) + len(part.heading_path) <= MAX_WORDS
            and len(prev.text) + len(part.text) < MAX_CHUNK_CHARS
        ):
            label = " > ".join(part.heading_path[len(_common(prev.heading_path, part.heading_path)):])
            prev.text = f"{prev.text}\n\n{label}: {part.text}" if label else f"{prev.text}\n\n{part.text}"
            prev.heading_path = _common(prev.heading_path, part.heading_path) or prev.heading_path[:1]
            prev.line_end = part.line_end
            prev.blocks += part.blocks
        else:
            out.append(part)
    return out


def _common(a: list[str], b: list[str]) -> list[str]:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]


def _part(heading: list[str], blocks: list[Block], line_offset: int) -> Part:
    kind = "code" if all(b.code for b in blocks) else "prose"
    return Part(
        heading_path=list(heading),
        text="\n\n".join(b.text for b in blocks),
        line_start=blocks[0].start + line_offset,
        line_end=blocks[-1].end + line_offset - 1,
        kind=kind,
        blocks=blocks,
    )


# ---------------------------------------------------------------- sentences
#: Page types whose sentences get their own vectors: the curated wiki, not sources or PR summaries.
SENTENCE_TYPES = frozenset({"pattern", "technique", "hardware", "kernel", "language", "migration", "ncu"})
#: A shorter "sentence" (a label, "See below.") says too little to stand for its chunk.
SENTENCE_MIN_WORDS = 5
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'`(*_\[])")


def sentences(text: str, min_words: int = SENTENCE_MIN_WORDS) -> list[str]:
    """The sentences of a chunk's paragraphs and list items, markup removed (code, tables and headings skipped).

    A short question in a developer's words lands closer to one sentence that says the same thing than to
    a 150-word chunk that also says five other things; search keeps a vector per sentence of the curated
    pages and scores a chunk by its best one (``index/vectors.py``).

    >>> sentences("- My GEMM at N=4224 is slower than at N=4096.\\n  It does 3% more work.\\n```\\nx = 1\\n```\\nA [wave](w.md) is all\\nCTAs the GPU holds. Short one.")
    ['My GEMM at N=4224 is slower than at N=4096.', 'It does 3% more work.', 'A wave is all CTAs the GPU holds.']
    """
    out: list[str] = []
    tokens = _md.parse(text)
    for i, tok in enumerate(tokens):
        # paragraphs only (list items and quotes hold paragraphs too); a table cell or heading is not prose
        if tok.type != "inline" or i == 0 or tokens[i - 1].type != "paragraph_open":
            continue
        flat = " ".join(_plain(tok.children or []).split())
        for sentence in _SENTENCE_END.split(flat):
            sentence = sentence.strip(" \"'")
            if len(sentence.split()) >= min_words:
                out.append(sentence)
    return out


def _plain(children: list) -> str:
    """The text of an inline token: link text kept, emphasis and code marks dropped, line breaks as spaces."""
    return "".join(c.content if c.type in ("text", "code_inline") else " " if c.type in ("softbreak", "hardbreak") else ""
                   for c in children)

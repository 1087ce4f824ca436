"""A corpus N times larger built from the real pages, and its embedding cache pre-filled (for ``kwiki ingest``).

Each of the two real corpora (``corpus/`` and the KernelWiki snapshot) is copied once as it is, then ``N - 1``
times as copies of every page under ``sources/`` and ``wiki/`` (``data/`` and ``artifacts/`` only once). Copy ``i``
of a page:

- lies beside the original as ``<stem>-c<iii>.md`` (same folder, so the same page type);
- has the id ``<id>-c<iii>`` (the frontmatter ``id:``; a page without one gets its id from the new file name);
- has the title ``<title> (copy <i>)`` (the frontmatter ``title:``, written as a quoted string, or the body's
  first ``# `` heading), so every chunk's content hash differs from the original's;
- has one word of four letters or more dropped from one in five of its body's prose lines (not headings, code,
  tables or frontmatter), chosen by a generator seeded with the page's path and ``i``.

Embedding some 1.9 million chunks and sentences on two cores would take days, so with ``--cache`` the copies'
vectors are written into the build's embedding cache before the ingest: each copy chunk (and sentence) gets the
real model's vector of the original chunk (sentence) at the same position, plus Gaussian noise of sigma 0.032 per
dimension, renormalized, as ``benchmarks/scale.py`` makes its copies. The copies are parsed and chunked by kwiki's
own reader to find their keys, so the ingest finds every copy's vector in the cache and embeds only what is new;
the build path itself is the real one. Listed questions are not perturbed: their vectors are the originals'.

``--titles-only`` (what the 100x ingest was measured with: parsing 300k copies twice takes an hour here) drops no
words: a copy differs from its original in id and title only, its chunks' keys follow from the original's sections
without parsing the copy, and its sentences are the original's (the same keys, so the same cached vectors).

    python benchmarks/synthetic_corpus.py --factor 10 --out /tmp/kwiki-x10 --cache /tmp/kwiki-x10-index/cache
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
SNAPSHOT = Path(os.environ.get("KWIKI_SNAPSHOT", REPO.parent / "shared" / "kernelwiki-snapshot"))
NOISE_SIGMA = 0.032
_FENCE = re.compile(r"^\s*(```|~~~)")
_WORD = re.compile(r"\b[A-Za-z]{4,}\b")


def _title_of(text: str) -> str | None:
    """The frontmatter title as kwiki's parser reads it (None: none, or a frontmatter it cannot read)."""
    from kwiki.ingest.frontmatter import split_frontmatter

    try:
        title = split_frontmatter(text)[0].get("title")
    except Exception:  # noqa: BLE001
        return None
    return str(title).strip() if title else None


def perturb(text: str, copy: int, seed: str, title: str | None, drop_words: bool = True) -> str:
    """Copy ``copy`` of a page's markdown (see the module docstring); ``title``: its frontmatter title (``_title_of``)."""
    rng = np.random.default_rng(int(hashlib.sha256(f"{seed}\0{copy}".encode()).hexdigest()[:16], 16))
    lines = text.split("\n")
    body_from = 0
    if lines and lines[0].strip() == "---":
        end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), None)
        if end is not None:
            body_from = end + 1
            titled = False
            i = 1
            while i < end:
                if re.match(r"^id:\s*\S", lines[i]):
                    value = lines[i].split(":", 1)[1].strip().strip("'\"")
                    lines[i] = f"id: {value}-c{copy:03d}"
                elif re.match(r"^title:\s*\S", lines[i]) and title is not None:
                    more = i + 1  # a long title continues on indented lines
                    while more < end and lines[more][:1] in (" ", "\t"):
                        more += 1
                    lines[i:more] = [f"title: {json.dumps(f'{title} (copy {copy})')}"]
                    end -= more - i - 1
                    titled = True
                i += 1
            body_from = end + 1
            if not titled:
                for i in range(body_from, len(lines)):
                    if lines[i].startswith("# "):
                        lines[i] = f"{lines[i]} (copy {copy})"
                        break
    fenced = False
    for i in range(body_from, len(lines) if drop_words else 0):
        line = lines[i]
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced or not line.strip() or line.lstrip().startswith(("#", "|", ">", "<")):
            continue
        if rng.random() < 0.2:
            words = list(_WORD.finditer(line))
            if words:
                w = words[int(rng.integers(len(words)))]
                lines[i] = (line[: w.start()] + line[w.end():]).replace("  ", " ", 1)
    return "\n".join(lines)


def pages_of(root: Path) -> list[Path]:
    return sorted(p for top in ("sources", "wiki") if (root / top).is_dir() for p in (root / top).rglob("*.md"))


def keys_of(path: Path, rel: Path, corpus: str, text: str) -> tuple[list[str], list[str], list[str]]:
    """(chunk content hashes, sentence keys, question keys) of a page as the build makes them."""
    from kwiki.index.writer import sentence_key
    from kwiki.ingest import chunking
    from kwiki.ingest.corpus import MAX_CHUNKS_PER_PAGE, _make_page, chunk_page
    from kwiki.ingest.frontmatter import split_frontmatter

    meta, body, body_line = split_frontmatter(text)
    page = _make_page(meta, body, body_line, rel, corpus, hashlib.sha256(text.encode()).hexdigest())
    chunks = chunk_page(page)[:MAX_CHUNKS_PER_PAGE]
    sents: list[str] = []
    if page.type in chunking.SENTENCE_TYPES:
        for c in chunks:
            sents += [sentence_key(t) for t in chunking.sentences(c.text, chunking.SENTENCE_MIN_WORDS)]
    return [c.content_hash for c in chunks], sents, [sentence_key(q) for q in page.questions]


def retitled_chunk_keys(path: Path, rel: Path, corpus: str, text: str, title: str) -> list[str] | None:
    """The chunk content hashes of ``text`` with its frontmatter title replaced by ``title`` (body unchanged), as
    ``corpus.chunk_page`` computes them, without parsing the copy: the sections are the original's."""
    from kwiki.ingest.chunking import split_sections
    from kwiki.ingest.corpus import MAX_CHUNKS_PER_PAGE, _make_page, _meta_text
    from kwiki.ingest.frontmatter import split_frontmatter

    meta, body, body_line = split_frontmatter(text)
    page = _make_page(meta, body, body_line, rel, corpus, "")
    parts = split_sections(page.body, page.body_line)
    sections = [(p.heading_path, p.text) for p in parts] or [([], _meta_text(page.model_copy(update={"title": title})))]
    return [hashlib.sha256(f"{title}\n{' > '.join(h)}\n{t}".encode()).hexdigest() for h, t in sections][:MAX_CHUNKS_PER_PAGE]


def noisy(vecs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    out = vecs + rng.normal(0, NOISE_SIGMA, vecs.shape).astype(np.float32)
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--factor", type=int, required=True)
    ap.add_argument("--out", type=Path, required=True, help="folder for the corpora (one sub-folder per corpus)")
    ap.add_argument("--cache", type=Path, help="embedding cache folder of the index to pre-fill")
    ap.add_argument("--titles-only", action="store_true",
                    help="copies differ from their original in id and title only (no words dropped): the chunks' keys "
                         "follow from the original's sections, so nothing is parsed twice; sentences and questions are "
                         "the originals' (and so are their cached vectors)")
    ap.add_argument("--seed-cache", type=Path, default=REPO / ".kwiki" / "cache",
                    help="a cache holding the real vectors of the originals (.npz or .sqlite3 of the shipped model)")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from kwiki.index import vectors
    from kwiki.settings import Settings

    model = vectors.model_id(Settings().embed_adapter)
    cache = None
    if args.cache:
        args.cache.mkdir(parents=True, exist_ok=True)
        probe = vectors.EmbeddingCache(args.cache, model)
        for seed in sorted(args.seed_cache.glob(probe.path.stem + ".*")):  # the originals' real vectors
            if not (args.cache / seed.name).exists() and seed.suffix == ".npz":
                shutil.copy(seed, args.cache / seed.name)
        cache = vectors.EmbeddingCache(args.cache, model)
    started = time.time()
    rng = np.random.default_rng(0)
    stats = {"pages": 0, "copies": 0, "prefilled": 0, "originals_missing": 0}
    for name, src in (("kwiki", REPO / "corpus"), ("kernelwiki", SNAPSHOT)):
        dst = args.out / name
        if dst.exists():
            shutil.rmtree(dst)
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns(".git"))
        for path in pages_of(src):
            rel = path.relative_to(src)
            text = path.read_bytes().decode("utf-8", errors="replace")  # as the reader does: "\r\n" stays
            stats["pages"] += 1
            try:
                orig = keys_of(path, rel, name, text) if cache else None
            except Exception:  # noqa: BLE001 - a page the reader skips is copied, never pre-filled
                orig = None
            orig_vecs = None
            if cache and orig:
                have = [not cache.missing(k) if k else True for k in orig]
                if all(have):
                    orig_vecs = [cache.get(k) for k in orig]
                else:
                    stats["originals_missing"] += 1
            batch_keys: list[str] = []
            batch_vecs: list[np.ndarray] = []
            title = _title_of(text)
            for i in range(1, args.factor):
                copy = perturb(text, i, str(rel), title, drop_words=not args.titles_only)
                crel = rel.with_name(f"{rel.stem}-c{i:03d}{rel.suffix}")
                (dst / crel).write_bytes(copy.encode("utf-8"))
                stats["copies"] += 1
                if orig_vecs is None:
                    continue
                try:
                    if args.titles_only and title is not None:
                        keys = (retitled_chunk_keys(path, rel, name, text, f"{title} (copy {i})") or [], [], [])
                    else:
                        keys = keys_of(dst / crel, crel, name, copy)
                except Exception:  # noqa: BLE001
                    continue
                for kind, own in enumerate(keys):
                    src_vecs = orig_vecs[kind]
                    if not own or not len(src_vecs):
                        continue
                    picked = src_vecs[np.minimum(np.arange(len(own)), len(src_vecs) - 1)]
                    batch_keys += own
                    batch_vecs.append(noisy(picked, rng) if kind < 2 else picked)
            if cache and batch_keys:
                cache.add(batch_keys, np.concatenate(batch_vecs))
                stats["prefilled"] += len(batch_keys)
    stats["seconds"] = round(time.time() - started, 1)
    print(json.dumps(stats))


if __name__ == "__main__":
    main()

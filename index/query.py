"""From user text to a query plan: tokens, alias expansion, filters.

Aliases expand both ways: a variant in the query adds its canonical term and the other
variants; the canonical term adds its variants. Multi-word aliases match as phrases::

    >>> table = AliasTable.from_groups({"tmem": ["tensor memory", "TMEM"]})
    >>> [g.canonical for g in table.match("how big is tensor memory")]
    ['tmem']
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

from kwiki.errors import BadRequest, QueryTooLong

from .analysis import ident_tokens, prose_tokens
from .bm25 import BM25Query, query_tokens
from .params import RankingParams

_NORM = re.compile(r"[^a-z0-9]+")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
MAX_PHRASE = 6
_CLAUSE_BREAK = re.compile(r"[,;:.?!]\s+|\s+(?:and|but|while|yet|although|even though)\s+", re.I)
_LEADING_JOIN = re.compile(r"^(?:and|but|while|yet|although|even though)\s+", re.I)


def norm_phrase(text: str) -> str:
    return _NORM.sub(" ", text.lower()).strip()


@dataclass
class AliasGroup:
    canonical: str
    variants: list[str]

    def phrases(self) -> list[str]:
        return [self.canonical, *self.variants]


@dataclass
class AliasTable:
    groups: list[AliasGroup] = field(default_factory=list)
    index: dict[str, list[int]] = field(default_factory=dict)  # normalized phrase -> group ids

    @classmethod
    def from_groups(cls, mapping: dict[str, list[str]]) -> "AliasTable":
        table = cls()
        for canonical, variants in mapping.items():
            table.add(canonical, variants)
        return table

    def add(self, canonical: str, variants: list[str]) -> None:
        gid = len(self.groups)
        self.groups.append(AliasGroup(canonical, list(variants)))
        for phrase in (canonical, *variants):
            key = norm_phrase(str(phrase))
            if key and gid not in self.index.setdefault(key, []):
                self.index[key].append(gid)

    def match(self, text: str) -> list[AliasGroup]:
        words = norm_phrase(text).split()
        found: list[int] = []
        for n in range(min(MAX_PHRASE, len(words)), 0, -1):
            for i in range(len(words) - n + 1):
                for gid in self.index.get(" ".join(words[i : i + n]), []):
                    if gid not in found:
                        found.append(gid)
        return [self.groups[g] for g in found]

    def canonical_of(self, value: str, candidates: set[str]) -> str | None:
        """The canonical term among ``candidates`` that ``value`` is an alias of (B200 -> sm100)."""
        key = norm_phrase(value)
        for gid in self.index.get(key, []):
            if self.groups[gid].canonical in candidates:
                return self.groups[gid].canonical
        return None


@dataclass
class Filters:
    type: list[str] = field(default_factory=list)
    tag: list[str] = field(default_factory=list)
    architecture: list[str] = field(default_factory=list)
    language: list[str] = field(default_factory=list)
    confidence: list[str] = field(default_factory=list)
    corpus: list[str] = field(default_factory=list)

    def key(self) -> tuple:
        return tuple(tuple(sorted(getattr(self, f))) for f in ("type", "tag", "architecture", "language", "confidence", "corpus"))

    def empty(self) -> bool:
        return not any(self.key())


@dataclass
class QueryPlan:
    text: str
    prose: list[str]
    idents: list[str]
    groups: list[AliasGroup]  # alias groups the text matched, whose phrases were searched too
    bm25: BM25Query
    filters: Filters
    corrections: list[tuple[str, str]] = field(default_factory=list)  # (word typed, indexed term searched)

    @property
    def aliases(self) -> list[str]:
        """Canonical terms of the matched alias groups."""
        return [g.canonical for g in self.groups]


def clauses(text: str, params: RankingParams, min_words: int = 3) -> list[str]:
    """The clauses of a long query (``params.long_query_words`` or more), each one clue the developer gives;
    [] for a short query or a single clause. Fragments under ``min_words`` words are dropped.

    >>> clauses("DRAM at 35% of peak, SM busy 20%, and most stall samples land on the instruction after each LDG",
    ...         RankingParams())
    ['DRAM at 35% of peak', 'SM busy 20%', 'most stall samples land on the instruction after each LDG']
    >>> clauses("tcgen05 ld latency tmem", RankingParams())
    []
    """
    if len(text.split()) < params.long_query_words:
        return []
    parts = [_LEADING_JOIN.sub("", p.strip(" ,;:.?!")) for p in _CLAUSE_BREAK.split(text)]
    parts = [p for p in parts if len(p.split()) >= min_words][: params.max_clauses]
    return parts if len(parts) >= 2 else []


def clean_query(text: str | None, max_chars: int) -> str:
    if text is None:
        raise BadRequest("missing query", hint="pass q=... (GET) or {\"q\": ...} (POST)")
    text = _CONTROL.sub(" ", text).strip()
    if not text:
        raise BadRequest("query is empty", hint="ask something, e.g. q=long scoreboard stalls")
    if len(text) > max_chars:
        raise QueryTooLong(
            f"query is {len(text)} characters, the limit is {max_chars}",
            hint="shorten the query; paste metric names or the key sentence, not a whole report",
        )
    return text


def plan_query(text: str, aliases: AliasTable, filters: Filters, params: RankingParams, use_aliases: bool = True,
               correct: Callable[[str], str | None] | None = None) -> QueryPlan:
    """Tokens, alias expansions and filter terms of ``text``. ``correct`` (``BM25Index.correct``) maps a word
    the index has never seen to the indexed word it most likely meant; that word is searched at
    ``params.typo_weight``; alias expansions at ``params.expansion_weight``."""
    prose, idents = query_tokens(text)
    terms = [(t, 1.0) for t in prose]
    ident_terms = [(t, 1.0) for t in idents]
    matched = aliases.match(text)[:8] if use_aliases else []
    if matched:
        seen = set(prose) | set(idents)
        for group in matched:
            for phrase in group.phrases()[:10]:
                for tok in prose_tokens(str(phrase).replace("-", " "), drop_stopwords=True):
                    if tok not in seen:
                        seen.add(tok)
                        terms.append((tok, params.expansion_weight))
                for tok in ident_tokens(str(phrase)):
                    if tok not in seen:
                        seen.add(tok)
                        ident_terms.append((tok, params.expansion_weight))
    if not terms and not ident_terms:
        # Only punctuation or stopwords: fall back to every word so "how to" still finds something.
        terms = [(t, 1.0) for t in dict.fromkeys(prose_tokens(text))][:32]
    query = BM25Query(terms=terms[:96], idents=ident_terms[:48])
    corrections: list[tuple[str, str]] = []
    if correct is not None:
        have = {t for t, _ in query.terms}
        for term, weight in list(query.terms):
            fixed = correct(term)
            if fixed and fixed not in have:
                have.add(fixed)
                query.terms.append((fixed, weight * params.typo_weight))
                if weight == 1.0:  # a word typed, not an alias expansion: show it as typed
                    corrections.append((_typed_word(text, term), fixed))
    for fname, prefix in (("type", "type"), ("corpus", "corpus"), ("confidence", "confidence"), ("tag", "tag"), ("language", "lang")):
        values = getattr(filters, fname)
        if values:
            query.must_filters.append([f"{prefix}:{v}" for v in values])
    if filters.architecture:
        query.must_filters.append([f"arch:{v}" for v in filters.architecture])
    return QueryPlan(text=text, prose=prose, idents=idents, groups=matched, bm25=query, filters=filters,
                     corrections=corrections)


def _typed_word(text: str, term: str) -> str:
    """The word of ``text`` that the analyzer turned into ``term`` ("schedulrs" for "schedulr")."""
    for word in text.split():
        if term in prose_tokens(word):
            return word.strip(".,;:!?()[]{}\"'`")
    return term

"""Page-level ranking stages after fusion: priors by page type and query intent, and the lift a leading page
gives the pages it links. Functions of the pages and scores they are given, with no Searcher state, so tuning
scripts and tests can call them alone.

    >>> from kwiki.index.ranking import named_repos
    >>> sorted(named_repos("the flashinfer PR for sm100 decode", {"flashinfer", "cutlass"}))
    ['flashinfer']
"""

from __future__ import annotations

import re
from typing import Callable, Iterable

from kwiki.ingest.models import Page

from .params import RankingParams
from .query import norm_phrase

#: A query that asks for a PR ("which PR", "pull request", "merged") lifts PR pages above the wiki.
_PR_INTENT = re.compile(r"\b(PRs?|pull requests?|merged|commit)\b|#\d+", re.I)
#: A query about moving code between generations ("porting to sm100", "what replaces wgmma.wait_group",
#: "do I still need ldmatrix") lifts the migration pages.
_MIGRATION_INTENT = re.compile(
    r"\b(port(s|ing|ed)?|migrat\w*|moving|move|upgrad\w*|replaces?|instead of|equivalent|still need)\b", re.I)
#: A query that asks for a source by what it is ("the blog that ...", "which paper", "the docs for").
_SOURCE_INTENT = re.compile(r"\b(blog|post|article|paper|arxiv|docs?|documentation|guide|spec(s|ification)?|"
                            r"datasheet|whitepaper|write-?up|talk)\b", re.I)
_SOURCE_TYPES = ("source-doc", "source-blog", "source-paper", "source-contest")


def named_repos(text: str, repo_names: set[str]) -> set[str]:
    """Projects of PR pages the query names ("flashinfer", "deep_gemm", "TensorRT-LLM")."""
    words = norm_phrase(text).split()
    joined = {"".join(words[i : i + n]) for n in (1, 2, 3) for i in range(len(words) - n + 1)}
    return repo_names & joined


def page_priors(pages: dict[str, Page], keys: Iterable[str], text: str, page_repo: dict[str, str],
                repo_names: set[str], params: RankingParams) -> dict[str, float]:
    """The type prior of each page, replaced by an intent prior when the query asks for PRs ("the cutlass PR
    that added ..."), names a project whose PR pages the index holds (``page_repo``: PR page key -> project), or
    is about porting code."""
    wants_pr = bool(_PR_INTENT.search(text))
    wants_migration = bool(_MIGRATION_INTENT.search(text))
    wants_source = bool(_SOURCE_INTENT.search(text))
    named = named_repos(text, repo_names)
    out = {}
    for key in keys:
        ptype = pages[key].type
        if wants_pr and ptype == "source-pr":
            out[key] = params.pr_intent_prior
        elif named and page_repo.get(key) in named:
            out[key] = params.repo_prior
        elif wants_migration and ptype == "migration":
            out[key] = params.migration_prior
        elif wants_source and ptype in _SOURCE_TYPES:
            out[key] = params.source_intent_prior * params.type_prior.get(ptype, params.default_prior)
        else:
            out[key] = params.type_prior.get(ptype, params.default_prior)
    return out


def lift_links(page_scores: dict[str, float], pages: dict[str, Page], find_page: Callable[[str, str], Page | None],
               rank_key: Callable[[tuple[str, float]], tuple], allowed: Callable[[str], bool],
               params: RankingParams) -> dict[str, tuple[str, str]]:
    """The leading page (first by ``rank_key``) brings up the pages it points to, each kept below it, in place in
    ``page_scores``: the techniques a pattern page names as fixes (``candidate_techniques``) gain ``fix_share`` x
    the lead's score, its ``related`` pages ``related_lift`` x their own (a related page the query does not touch
    stays where it is). ``find_page(id, corpus)`` resolves a link; ``allowed(key)`` says whether the filters let
    a page through.

    Returns {lifted page key: ("fix" or "related", the lead's key)}, for ``why.fix_of`` / ``why.related_to``.
    """
    if not page_scores:
        return {}
    lead, lead_score = min(page_scores.items(), key=rank_key)
    page = pages[lead]
    links = [(t, "fix") for t in page.candidate_techniques if page.type == "pattern"]
    links += [(r, "related") for r in page.related]
    lifted: dict[str, tuple[str, str]] = {}
    for target, kind in links:
        other = find_page(target, page.corpus)
        if other is None or other.key == lead or other.key in lifted or not allowed(other.key):
            continue
        own = page_scores.get(other.key, 0.0)
        raised = own + params.fix_share * lead_score if kind == "fix" else own * (1 + params.related_lift)
        # a page lifted by a link ranks below the page that links it, never above
        page_scores[other.key] = min(raised, 0.999 * lead_score)
        lifted[other.key] = (kind, lead)
    return lifted

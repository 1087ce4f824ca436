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

from .query import norm_phrase

#: Curated pages first: KernelWiki has ~50 PR pages for every wiki page.
TYPE_PRIOR = {
    "pattern": 1.0, "technique": 1.0, "hardware": 1.0, "kernel": 1.0, "language": 1.0, "migration": 1.0, "ncu": 1.0,
    "source-doc": 0.85, "source-paper": 0.85, "source-blog": 0.8, "source-contest": 0.75, "source-pr": 0.85,
    "experience": 0.7,
}
DEFAULT_PRIOR = 0.8
#: A query that asks for a PR ("which PR", "pull request", "merged") lifts PR pages above the wiki.
_PR_INTENT = re.compile(r"\b(PRs?|pull requests?|merged|commit)\b|#\d+", re.I)
PR_INTENT_PRIOR = 1.15
#: A query about moving code between generations ("porting to sm100", "what replaces wgmma.wait_group",
#: "do I still need ldmatrix") lifts the migration pages (dev nDCG@10 of migration questions 0.82 -> 0.88).
_MIGRATION_INTENT = re.compile(
    r"\b(port(s|ing|ed)?|migrat\w*|moving|move|upgrad\w*|replaces?|instead of|equivalent|still need)\b", re.I)
MIGRATION_PRIOR = 1.5
#: A query that names a project ("tilelang pass that ...", "the sglang config for small M") gives that
#: project's PR pages the PR-intent prior too (tuned on the kernelwiki dev split).
REPO_PRIOR = 1.15
#: The page that leads a ranking brings up the pages it links, capped just below its own score: a pattern
#: page the techniques it names as fixes (``candidate_techniques``, + FIX_SHARE x its score), any page its
#: ``related`` pages (x 1 + RELATED_LIFT). Not when an NCU signal was routed: routing lifts its own pages (with
#: the related lift on there too, dev 0.882 -> 0.881).
#: Dev nDCG@10: fixes 0.869 -> 0.883 (corpus; symptom questions 0.77 -> 0.82), 0.839 -> 0.835 (kernelwiki,
#: whose labels rarely count a technique as useful for a symptom); related pages x 1.2 (x 1.35 / x 1.5 and
#: + 0.1 / 0.2 / 0.3 x the lead's score tried, on the 250-question dev split) 0.876 -> 0.881 corpus, 0.851 -> 0.853
#: kernelwiki. Multiplying keeps a related page the query does not touch out of the top ten: an added share of
#: the lead's score (0.882 / 0.854) pushed four related pages above the migration pages of a porting question.
FIX_SHARE = 0.4
RELATED_LIFT = 0.2


def named_repos(text: str, repo_names: set[str]) -> set[str]:
    """Projects of PR pages the query names ("flashinfer", "deep_gemm", "TensorRT-LLM")."""
    words = norm_phrase(text).split()
    joined = {"".join(words[i : i + n]) for n in (1, 2, 3) for i in range(len(words) - n + 1)}
    return repo_names & joined


def page_priors(pages: dict[str, Page], keys: Iterable[str], text: str, page_repo: dict[str, str],
                repo_names: set[str]) -> dict[str, float]:
    """The type prior of each page, replaced by an intent prior when the query asks for PRs ("the cutlass PR
    that added ..."), names a project whose PR pages the index holds (``page_repo``: PR page key -> project), or
    is about porting code."""
    wants_pr = bool(_PR_INTENT.search(text))
    wants_migration = bool(_MIGRATION_INTENT.search(text))
    named = named_repos(text, repo_names)
    out = {}
    for key in keys:
        ptype = pages[key].type
        if wants_pr and ptype == "source-pr":
            out[key] = PR_INTENT_PRIOR
        elif named and page_repo.get(key) in named:
            out[key] = REPO_PRIOR
        elif wants_migration and ptype == "migration":
            out[key] = MIGRATION_PRIOR
        else:
            out[key] = TYPE_PRIOR.get(ptype, DEFAULT_PRIOR)
    return out


def lift_links(page_scores: dict[str, float], pages: dict[str, Page], find_page: Callable[[str, str], Page | None],
               rank_key: Callable[[tuple[str, float]], tuple], allowed: Callable[[str], bool]) -> dict[str, tuple[str, str]]:
    """The leading page (first by ``rank_key``) brings up the pages it points to, each kept below it, in place in
    ``page_scores``: the techniques a pattern page names as fixes (``candidate_techniques``) gain ``FIX_SHARE`` x
    the lead's score, its ``related`` pages ``RELATED_LIFT`` x their own (a related page the query does not touch
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
        raised = own + FIX_SHARE * lead_score if kind == "fix" else own * (1 + RELATED_LIFT)
        # a page lifted by a link ranks below the page that links it, never above
        page_scores[other.key] = min(raised, 0.999 * lead_score)
        lifted[other.key] = (kind, lead)
    return lifted

"""Text machinery shared by the agents, the checks, the renderer and the offline model.

Three jobs live here: counting the words of a Markdown post (the one count the product uses for
the word range), finding the citation markers in it, and ranking source passages against a
query with a small, deterministic BM25.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Iterable

from .briefs import Passage

# --- Markdown shapes ------------------------------------------------------------------------

_FENCE = re.compile(r"^ {0,3}(```|~~~).*?^ {0,3}\1[^\n]*$", re.M | re.S)
_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]+)\]\((?:[^()\s]|\([^)]*\))*(?:\s+\"[^\"]*\")?\)")
_AUTOLINK = re.compile(r"<(?:https?|mailto|ftp):[^>\s]*>", re.I)
_BARE_URL = re.compile(r"\bhttps?://\S+", re.I)
_HTML_TAG = re.compile(r"</?[A-Za-z][^>]*>")
_LINE_MARKER = re.compile(r"^[ \t]*(?:>[ \t]?)*[ \t]*(?:#{1,6}[ \t]+|[-*+][ \t]+|\d{1,9}[.)][ \t]+)?", re.M)
_EMPHASIS = re.compile(r"(?<![\w])[*_~`]+|[*_~`]+(?![\w])")
_HAS_WORD = re.compile(r"[^\W_]", re.UNICODE)

# A citation group: [3], [1, 2] or [1,2,3]. Not a Markdown link's text: "[1](url)" is a link.
CITATION_GROUP = re.compile(r"\[(\d+(?:[ \t]*,[ \t]*\d+)*)\](?!\()")


def strip_markdown(markdown: str) -> str:
    """Markdown reduced to its prose: what :func:`count_words` counts. Line breaks are kept."""
    text = _FENCE.sub(" ", markdown)
    text = _IMAGE.sub(" ", text)
    text = _LINK.sub(r"\1", text)
    text = _AUTOLINK.sub(" ", text)
    text = _BARE_URL.sub(" ", text)
    text = _HTML_TAG.sub(" ", text)
    text = CITATION_GROUP.sub(" ", text)
    text = _LINE_MARKER.sub("", text)
    return _EMPHASIS.sub("", text)


def count_words(markdown: str) -> int:
    """The number of prose words in a Markdown text: THE word count of the product.

    Definition: the text is reduced to prose, then split on whitespace, and every token holding
    at least one letter or digit is a word. Reducing to prose drops fenced code blocks, images,
    HTML tags, citation markers (``[3]``, ``[1, 2]``), link targets (``[text](url)`` counts
    ``text`` only), autolinks and bare ``http(s)://`` URLs, the markers that open a line
    (``#`` headings, ``-``/``*``/``+``/``1.`` list items, ``>`` quotes) and emphasis/code
    markers (``*``, ``_``, ``~``, backticks) around words. So ``at-least-once`` is one word,
    ``snake_case`` is one word, and a lone ``—`` or ``|`` is none.
    """
    return sum(1 for token in strip_markdown(markdown).split() if _HAS_WORD.search(token))


def cited_ids(body: str) -> list[int]:
    """Citation numbers in order of appearance, repeats included.

    ``[1]``, ``[1, 2]`` and ``[1][2]`` are citations; ``[text](url)`` and ``[1](url)`` are links,
    and numbers inside fenced code blocks are not citations.
    """
    text = _FENCE.sub(" ", body)
    ids: list[int] = []
    for match in CITATION_GROUP.finditer(text):
        ids.extend(int(n) for n in re.split(r"[ \t]*,[ \t]*", match.group(1)))
    return ids


# --- Sentences -------------------------------------------------------------------------------

_ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "vs.", "cf.", "Mr.", "Mrs.", "Dr.", "St.", "No.", "Fig.")
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[*_`]?[A-Z0-9])")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d{1,9}[.)])\s+")
_HEADING = re.compile(r"^\s*#{1,6}\s+")


def clean_sentence(text: str) -> str:
    """A sentence of source text made safe to quote in a post.

    Links become their text and the source's own numeric markers (``[2]``) are dropped, so they
    can never be mistaken for citations of findings.
    """
    text = _IMAGE.sub(" ", text)
    text = _LINK.sub(r"\1", text)
    text = CITATION_GROUP.sub("", text)
    text = re.sub(r"\s+([.,;:!?])", r"\1", text)
    return re.sub(r"\s+", " ", text).strip()


def split_sentences(text: str) -> list[str]:
    """Sentences of a paragraph of Markdown, in order. Headings are not sentences.

    Each list item counts as (at least) one sentence; lines of one paragraph are joined.
    """
    units: list[str] = []
    current: list[str] = []
    for line in _FENCE.sub("\n", text).splitlines():
        if not line.strip() or _HEADING.match(line):
            if current:
                units.append(" ".join(current))
                current = []
            continue
        if _LIST_ITEM.match(line):
            if current:
                units.append(" ".join(current))
            current = [_LIST_ITEM.sub("", line).strip()]
        else:
            current.append(line.strip().lstrip(">").strip())
    if current:
        units.append(" ".join(current))
    sentences: list[str] = []
    for unit in units:
        pieces = _SENTENCE_END.split(unit)
        merged: list[str] = []
        for piece in pieces:
            if merged and merged[-1].endswith(_ABBREVIATIONS):
                merged[-1] = f"{merged[-1]} {piece}"
            else:
                merged.append(piece)
        sentences.extend(s.strip() for s in merged if s.strip())
    return sentences


# --- Terms -----------------------------------------------------------------------------------

STOP_WORDS = frozenset(
    """a about above after again against all also am an and any are aren't as at be because been
    before being below between both but by can cannot could did do does doing don down during each
    either else ever every few for from further get gets got had has have having he her here hers
    herself him himself his how however i if in into is isn it it's its itself just let like may
    me might more most much must my myself neither no nor not now of off often on once one only or
    other ought our ours ourselves out over own per rather really same say says shall she should
    since so some such than that that's the their theirs them themselves then there these they
    this those though through thus to too under until up upon us use used uses using very via was
    we were what when where whether which while who whom whose why will with within without would
    yet you your yours yourself s t d ll m re ve""".split()
)

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


def stem(word: str) -> str:
    """A light, deterministic suffix stripper: enough to match ``queues``/``queued``/``queue``."""
    w = word.lower()
    if len(w) <= 3 or w.isdigit():
        return w
    if w.endswith("ies") and len(w) > 4:
        w = w[:-3] + "i"
    elif w.endswith("sses"):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    if w.endswith("ation") and len(w) > 7:
        w = w[:-5]
    elif w.endswith("ing") and len(w) > 5:
        w = w[:-3]
    elif w.endswith("ed") and len(w) > 4:
        w = w[:-2]
    elif w.endswith("ly") and len(w) > 5:
        w = w[:-2]
    if w.endswith("y") and len(w) > 3:
        w = w[:-1] + "i"
    if w.endswith("e") and len(w) > 3:
        w = w[:-1]
    if len(w) > 3 and w[-1] == w[-2] and w[-1] not in "aeiouslz":
        w = w[:-1]
    return w


def words(text: str) -> list[str]:
    """Lower-cased words of a text, stop words dropped, not stemmed."""
    return [w for w in _WORD.findall(text.lower().replace("’", "'")) if w not in STOP_WORDS and len(w) > 1]


def terms(text: str) -> list[str]:
    """Stemmed content terms of a text, in order, repeats included."""
    return [stem(w.split("'")[0]) for w in words(text)]


# --- Ranking ---------------------------------------------------------------------------------

BM25_K1 = 1.5
BM25_B = 0.75


def bm25_scores(documents: list[list[str]], query_terms: Iterable[str]) -> list[float]:
    """BM25 score of each tokenised document for a set of query terms."""
    n = len(documents)
    if n == 0:
        return []
    query = sorted(set(query_terms))
    avgdl = sum(len(d) for d in documents) / n or 1.0
    df = Counter(t for d in documents for t in set(d))
    scores: list[float] = []
    for doc in documents:
        tf = Counter(doc)
        norm = BM25_K1 * (1 - BM25_B + BM25_B * len(doc) / avgdl)
        score = 0.0
        for term in query:
            f = tf.get(term, 0)
            if f:
                idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
                score += idf * f * (BM25_K1 + 1) / (f + norm)
        scores.append(score)
    return scores


def rank_passages(passages: list[Passage], query: str, *, limit: int) -> list[Passage]:
    """The ``limit`` passages that best match ``query``, best first (BM25 over stemmed terms).

    Passages that share no term with the query are left out. A query without any content term
    ranks nothing and returns the first ``limit`` passages in their given order. Ties are broken
    by passage number, so the ranking is deterministic.
    """
    if limit <= 0 or not passages:
        return []
    query_terms = set(terms(query))
    if not query_terms:
        return sorted(passages, key=lambda p: p.number)[:limit]
    scores = bm25_scores([terms(p.text) for p in passages], query_terms)
    ranked = sorted(
        ((round(s, 9), p) for s, p in zip(scores, passages) if s > 0),
        key=lambda sp: (-sp[0], sp[1].number),
    )
    return [p for _, p in ranked[:limit]]

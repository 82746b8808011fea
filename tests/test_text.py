"""The product's word count, citation parsing and passage ranking."""

from __future__ import annotations

import random

import pytest

from blogwriter.briefs import Passage
from blogwriter.state import SourceRef
from blogwriter.text import clean_sentence, cited_ids, count_words, rank_passages, split_sentences, stem, terms

SRC = SourceRef(Kind="file", Location="/notes/a.md", Title="A")


def _p(number: int, text: str) -> Passage:
    return Passage(number=number, source=SRC, text=text)


@pytest.mark.parametrize(
    ("markdown", "expected"),
    [
        ("one two three", 3),
        ("## A heading here\n\nbody text", 5),
        ("- first item\n* second item\n+ third\n1. fourth item\n2) fifth", 8),
        ("> quoted words here\n>> nested quote", 5),
        ("**bold** and *italic* and _under_ and `code`", 7),
        ("A fact [3]. Another fact [1, 2]. And [4][5].", 5),
        ("See [the docs](https://example.com/a/b?c=d) now", 4),
        ("Visit https://example.com/x or <https://example.org> today", 3),
        ("at-least-once delivery uses snake_case names", 5),
        ("a — b | c", 3),
        ("before\n\n```python\nx = call(many, words, here)\n```\n\nafter", 2),
        ("![a picture of words](img.png) caption text", 2),
        ("", 0),
    ],
)
def test_count_words_counts_prose_only(markdown: str, expected: int) -> None:
    assert count_words(markdown) == expected


def test_count_words_does_not_count_citations_but_split_does() -> None:
    body = "Queues deliver at least once [1]. Workers claim steps [2][3]."
    assert count_words(body) == 8
    assert len(body.split()) == 10


def test_cited_ids_in_order_of_appearance_with_repeats() -> None:
    body = "First [2]. Then [1, 3] and [4][2]. Also [5,6]."
    assert cited_ids(body) == [2, 1, 3, 4, 2, 5, 6]


def test_cited_ids_ignores_links_and_code() -> None:
    body = "A [link](https://x.org) and [7](https://y.org) but [8].\n\n```\narr[9]\n```\n"
    assert cited_ids(body) == [8]


def test_cited_ids_ignores_non_numeric_brackets() -> None:
    assert cited_ids("a [note] and [1a] and [ 2 ] and [3]") == [3]


def test_stem_conflates_inflections() -> None:
    assert stem("queues") == stem("queued") == stem("queue") == stem("queueing")
    assert stem("cited") == stem("citation") == stem("cites")
    assert stem("running") == "run"
    assert stem("status") == "status"


def test_terms_drop_stop_words() -> None:
    assert terms("The router is the only place that decides") == [stem("router"), stem("place"), stem("decides")]
    assert "only" not in terms("only the router")


def test_split_sentences_handles_lists_headings_and_abbreviations() -> None:
    text = "# Heading\n\nFirst one, e.g. this. Second one!\n- item one\n- item two"
    assert split_sentences(text) == ["First one, e.g. this.", "Second one!", "item one", "item two"]


def test_clean_sentence_drops_source_markers_and_link_targets() -> None:
    assert clean_sentence("See [the guide](http://x.org) for more [2].") == "See the guide for more."


def test_rank_passages_puts_the_most_relevant_first() -> None:
    passages = [
        _p(1, "Bread needs flour, water and salt."),
        _p(2, "The router reads the change feed and enqueues the next step."),
        _p(3, "Queues deliver messages at least once; a queued message may arrive twice."),
        _p(4, "Nothing about the subject at all here."),
    ]
    ranked = rank_passages(passages, "message queue delivery", limit=10)
    assert [p.number for p in ranked] == [3]
    ranked = rank_passages(passages, "queues and the router", limit=10)
    assert {p.number for p in ranked} == {2, 3}


def test_rank_passages_respects_limit_and_breaks_ties_by_number() -> None:
    passages = [_p(n, "identical text about leases") for n in (5, 2, 9, 1)]
    random.Random(7).shuffle(passages)
    assert [p.number for p in rank_passages(passages, "lease", limit=3)] == [1, 2, 5]


def test_rank_passages_is_deterministic_whatever_the_input_order() -> None:
    passages = [_p(i, f"text {'etag ' * (i % 3)} cosmos item number {i}") for i in range(1, 30)]
    expected = [p.number for p in rank_passages(passages, "etag cosmos", limit=10)]
    shuffled = passages[:]
    random.Random(1).shuffle(shuffled)
    assert [p.number for p in rank_passages(shuffled, "etag cosmos", limit=10)] == expected


def test_rank_passages_with_only_stop_words_keeps_given_order() -> None:
    passages = [_p(3, "c text here"), _p(1, "a text here"), _p(2, "b text here")]
    assert [p.number for p in rank_passages(passages, "the and of", limit=2)] == [1, 2]
    assert rank_passages(passages, "text", limit=0) == []

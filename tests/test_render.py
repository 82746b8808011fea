"""Rendering a post: citations renumbered to sources, and the references list."""

from __future__ import annotations

import re

from blogwriter.render import references, render_post, renumber
from blogwriter.state import Finding, SourceRef

A = SourceRef(Kind="file", Location="/notes/a.md", Title="Notes A")
B = SourceRef(Kind="url", Location="https://example.com/b", Title="Page B")
C = SourceRef(Kind="file", Location="notes/c.txt", Title="")


def _f(i: int, src: SourceRef) -> Finding:
    return Finding(Id=i, Claim=f"claim {i}", Source=src)


FINDINGS = [_f(1, A), _f(2, B), _f(3, A), _f(4, C), _f(5, B)]


def _refs(post: str) -> dict[int, str]:
    section = post.split("## References", 1)[1]
    return {int(m.group(1)): m.group(2) for m in re.finditer(r"^(\d+)\. (.+)$", section, re.M)}


def test_sources_are_numbered_in_order_of_first_citation() -> None:
    body, cited = renumber("x [4]. y [2]. z [1].", FINDINGS)
    assert body == "x [1]. y [2]. z [3]."
    assert cited == [C, B, A]


def test_findings_from_one_source_share_a_number() -> None:
    body, cited = renumber("x [1]. y [3]. z [2]. w [5].", FINDINGS)
    assert body == "x [1]. y [1]. z [2]. w [2]."
    assert cited == [A, B]


def test_adjacent_duplicates_collapse_and_lists_keep_working() -> None:
    body, _ = renumber("a [1][3]. b [2][5][1]. c [1, 3, 4].", FINDINGS)
    assert body == "a [1]. b [2][1]. c [1, 3]."


def test_unknown_ids_are_dropped_so_nothing_dangles() -> None:
    body, cited = renumber("a [9]. b [2][9]. c [9, 1].", FINDINGS)
    assert body == "a. b [1]. c [2]."
    assert cited == [B, A]


def test_links_and_fenced_code_are_left_alone() -> None:
    text = "see [1](http://x) and [2].\n\n```\nitems[1]\n```"
    body, cited = renumber(text, FINDINGS)
    assert body == "see [1](http://x) and [1].\n\n```\nitems[1]\n```"
    assert cited == [B]


def test_reference_lines_for_files_and_urls() -> None:
    text = references([A, B, C])
    assert text.splitlines() == [
        "## References",
        "",
        "1. Notes A — /notes/a.md",
        "2. Page B — [https://example.com/b](https://example.com/b)",
        "3. notes/c.txt — notes/c.txt",
    ]
    assert references([]) == ""


def test_render_post_has_title_body_and_resolving_references() -> None:
    post = render_post("  My   title ", "Intro [5].\n\n## Part\n\nMore [1][3] and [4].", FINDINGS)
    assert post.startswith("# My title\n\nIntro [1].")
    body = post.split("## References")[0]
    used = {int(n) for group in re.findall(r"\[(\d+(?:, \d+)*)\](?!\()", body) for n in group.split(", ")}
    refs = _refs(post)
    assert used == set(refs) == {1, 2, 3}
    assert refs[1].startswith("Page B") and refs[2] == "Notes A — /notes/a.md" and refs[3].endswith("notes/c.txt")


def test_render_post_without_citations_has_no_references() -> None:
    post = render_post("T", "Nothing cited here.", FINDINGS)
    assert "## References" not in post
    assert post == "# T\n\nNothing cited here.\n"


def test_a_run_of_sentences_from_one_source_is_cited_once_at_its_end() -> None:
    from blogwriter.render import merge_repeated_citations

    text = "A is true [1]. B follows [1]. C differs [2]. D again [1].\n\n## Head [1]\n\nE [1]. F [1]."
    assert merge_repeated_citations(text) == (
        "A is true. B follows [1]. C differs [2]. D again [1].\n\n## Head [1]\n\nE. F [1]."
    )


def test_merging_keeps_a_citation_when_an_uncited_sentence_follows() -> None:
    from blogwriter.render import merge_repeated_citations

    text = "A [1]. An aside without a source. B [1]."
    assert merge_repeated_citations(text) == text

"""The command line: the main job end to end, the other commands, and one-line refusals that
write nothing."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from blogwriter import cli
from blogwriter.text import count_words
from conftest import EXAMPLE_SOURCES

TOPIC = "How BlogWriter turns a topic into a cited blog post"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def body_of(post: str) -> str:
    return post.split("\n", 1)[1].split("\n## References\n")[0]


def test_write_prints_a_cited_post_inside_the_range(capsys) -> None:
    rc, out, err = run(capsys, "write", TOPIC, "--source", str(EXAMPLE_SOURCES))
    assert rc == 0, err
    assert out.startswith("# ")
    body = body_of(out)
    assert 600 <= count_words(body) <= 900 and 600 <= len(body.split()) <= 900
    refs = re.findall(r"^(\d+)\. .* — (.+)$", out.split("\n## References\n")[1], flags=re.M)
    cited = {int(n) for group in re.findall(r"\[(\d+(?:,\s*\d+)*)\]", body) for n in group.split(",")}
    assert cited == {int(n) for n, _ in refs}
    for _, location in refs:
        assert Path(location).is_file() and Path(location).parent == EXAMPLE_SOURCES.resolve()
    assert "completed" in err and "tokens" in err  # the progress display


def test_sessions_show_and_revise(capsys, tmp_path: Path) -> None:
    rc, _, _ = run(capsys, "write", TOPIC, "--min-words", "300", "--max-words", "500", "--source", str(EXAMPLE_SOURCES))
    assert rc == 0
    rc, out, _ = run(capsys, "sessions")
    [line] = out.splitlines()
    sid = line.split()[0]
    rc, out, _ = run(capsys, "show", sid)
    doc = json.loads(out)
    assert {"id", "OwnerId", "CreatedAt", "UpdatedAt", "State"} <= set(doc) and "_etag" not in doc
    assert {"MainTask", "MinWords", "MaxWords", "ResearchFindings", "SearchRefinements", "Draft", "ReviewNotes",
            "RevisionNumber", "NextStep", "CurrentSubTask"} <= set(doc["State"])
    findings = [f["Id"] for f in doc["State"]["ResearchFindings"]]
    rc, out, err = run(capsys, "revise", sid, "--feedback", "Say more about poison queues.", "--out",
                       str(tmp_path / "v2.md"))
    assert rc == 0, err
    assert (tmp_path / "v2.md").read_text().startswith("# ")
    rc, out, _ = run(capsys, "show", sid)
    after = json.loads(out)["State"]
    assert len(after["Revisions"]) > len(doc["State"]["Revisions"])
    assert [f["Id"] for f in after["ResearchFindings"]][: len(findings)] == findings
    assert after["Feedback"][0]["Applied"] is True


@pytest.mark.parametrize("argv,message", [
    pytest.param(["write", TOPIC, "--min-words", "900", "--max-words", "100", "--source", "examples/sources"],
                 "--min-words must not be greater than --max-words", id="min-over-max"),
    pytest.param(["write", TOPIC, "--min-words", "0", "--source", "examples/sources"], "--min-words", id="zero-size"),
    pytest.param(["write", TOPIC, "--max-words", "-5", "--source", "examples/sources"], "--max-words", id="negative"),
    pytest.param(["write", TOPIC, "--max-words", "999999", "--source", "examples/sources"], "--max-words", id="absurd"),
    pytest.param(["write", "", "--source", "examples/sources"], "TOPIC", id="empty-topic"),
    pytest.param(["write", "x" * 5000, "--source", "examples/sources"], "TOPIC", id="huge-topic"),
    pytest.param(["write", TOPIC, "--source", "/no/such/folder"], "no such file or folder", id="missing-source"),
    pytest.param(["write", TOPIC], "no sources given and no model configured", id="no-sources-no-model"),
    pytest.param(["show", "no-such-session"], "not found", id="unknown-session-show"),
    pytest.param(["revise", "no-such-session", "--feedback", "x"], "not found", id="unknown-session-revise"),
])
def test_bad_arguments_give_one_line_and_write_nothing(argv, message, capsys, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(Path(__file__).resolve().parent.parent)
    out_file = tmp_path / "post.md"
    rc, out, err = run(capsys, *argv, *(["--out", str(out_file)] if argv[0] == "write" else []))
    assert rc == cli.EXIT_USAGE
    assert len(err.strip().splitlines()) == 1 and message in err, err
    assert out == "" and not out_file.exists()
    rc, out, _ = run(capsys, "sessions")
    assert rc == 0 and out == ""


def test_an_unknown_session_in_an_existing_home_is_one_line(capsys) -> None:
    assert run(capsys, "write", TOPIC, "--min-words", "200", "--max-words", "400", "--source", str(EXAMPLE_SOURCES))[0] == 0
    rc, out, err = run(capsys, "show", "no-such-session")
    assert rc == cli.EXIT_USAGE and err.strip() == "blogwriter: error: session no-such-session not found"

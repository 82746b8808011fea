"""``blogwriter``: write a post, list and show sessions, revise with feedback, run the local host.

Every failure the user can fix is one line on stderr and a non-zero exit, with nothing written.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

from pydantic import ValidationError

from . import sessions, views
from .errors import BlogWriterError
from .pipeline import Pipeline
from .services import Services
from .settings import Settings
from .sources import SourceLoader
from .state import FeedbackRequest, PostRequest, SessionDocument, SessionStatus

EXIT_FAILED = 1  # the pipeline ran but the session failed
EXIT_USAGE = 2  # bad arguments, bad settings, unknown session: nothing was written

_FLAG = {"topic": "TOPIC", "minWords": "--min-words", "maxWords": "--max-words", "sources": "--source",
         "tokenBudget": "--token-budget", "feedback": "--feedback"}


class UsageError(Exception):
    pass


def _one_line(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = [str(p) for p in err["loc"]]
    field = _FLAG.get(loc[0], loc[0]) if loc else ""
    msg = err["msg"].removeprefix("Value error, ")
    for name, flag in _FLAG.items():  # speak in the CLI's terms: --min-words, not minWords
        msg = msg.replace(name, flag)
    return f"{field}: {msg}" if field else msg


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="blogwriter", description="Write researched, cited blog posts with three agents.")
    p.add_argument("-v", "--verbose", action="store_true", help="log what every handler does")
    sub = p.add_subparsers(dest="command", required=True)

    w = sub.add_parser("write", help="write a post about TOPIC and print it (or save it with --out)")
    w.add_argument("topic")
    w.add_argument("--min-words", type=int, default=600)
    w.add_argument("--max-words", type=int, default=900)
    w.add_argument("--source", action="append", default=[], metavar="PATH_OR_URL",
                   help="a file, a folder of .md/.txt files, or a URL; repeatable")
    w.add_argument("--token-budget", type=int, default=None, help="tokens this session may use (real models)")
    w.add_argument("--out", type=Path, help="write the Markdown post to this file")

    sub.add_parser("sessions", help="list your sessions, newest first")
    s = sub.add_parser("show", help="print a session document as JSON")
    s.add_argument("id")
    r = sub.add_parser("revise", help="revise a finished post with your feedback")
    r.add_argument("id")
    r.add_argument("--feedback", required=True)
    r.add_argument("--out", type=Path)
    sub.add_parser("host", help="run function_app.py on the local host (see --help of the host)", add_help=False)
    return p


def _progress(started: float):
    def report(doc: SessionDocument) -> None:
        st = doc.State
        step = f"{st.Step.Name.value} #{st.Step.Seq} {st.Step.Status.value}" if st.Step else "starting"
        print(
            f"[{time.monotonic() - started:6.1f}s] {st.Status.value:9} {step:22} rev {st.RevisionNumber}"
            f" · tokens {st.TokenUsage.TotalTokens} · {st.CurrentSubTask}",
            file=sys.stderr,
        )
    return report


def _emit(doc: SessionDocument, out: Path | None) -> int:
    st = doc.State
    if st.Status is SessionStatus.COMPLETED and st.Verdict is not None and not st.Verdict.Approved:
        print(f"note: {st.Outcome}; last review notes:\n{st.ReviewNotes}", file=sys.stderr)
    if st.Status is not SessionStatus.COMPLETED:
        print(f"blogwriter: session {doc.id} {st.Status.value}: {st.Error or st.CurrentSubTask}", file=sys.stderr)
    if st.Draft:
        post = views.post_markdown(doc)
        if out:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(post if post.endswith("\n") else post + "\n", encoding="utf-8")
            print(f"wrote {out} (session {doc.id})", file=sys.stderr)
        else:
            print(post)
    return 0 if st.Status is SessionStatus.COMPLETED else EXIT_FAILED


def _build(settings: Settings) -> Services:
    from .wiring import build_services

    return build_services(settings)


def cmd_write(args: argparse.Namespace, settings: Settings) -> int:
    try:
        request = PostRequest(topic=args.topic, minWords=args.min_words, maxWords=args.max_words,
                              sources=[str(s) for s in args.source], tokenBudget=args.token_budget)
    except ValidationError as exc:
        raise UsageError(_one_line(exc)) from None
    # Check sources and the model before anything is created, so a refusal writes nothing.
    if request.sources:
        SourceLoader(allow_local_files=settings.allow_local_files, roots=settings.source_roots).validate(request.sources)
    elif not settings.models.configured:
        raise UsageError("no sources given and no model configured: pass --source PATH (a file or folder) "
                         "or configure a model (see the README)")
    services = _build(settings)
    try:
        stored = sessions.create_session(services, request, settings.owner)
        print(f"session {stored.doc.id}: {request.topic!r}, {request.minWords}-{request.maxWords} words",
              file=sys.stderr)
        doc = Pipeline(services).run_until_done(settings.owner, stored.doc.id, on_progress=_progress(time.monotonic()))
        return _emit(doc, args.out)
    finally:
        services.close()


def _require_store(settings: Settings, session_id: str) -> None:
    """Reading a session from a home that has no database yet must not create one."""
    if settings.backend == "embedded" and not settings.db_path.exists():
        raise UsageError(f"session {session_id} not found (no sessions in {settings.home})")


def cmd_revise(args: argparse.Namespace, settings: Settings) -> int:
    try:
        request = FeedbackRequest(feedback=args.feedback)
    except ValidationError as exc:
        raise UsageError(_one_line(exc)) from None
    _require_store(settings, args.id)
    services = _build(settings)
    try:
        sessions.add_feedback(services, settings.owner, args.id, request)
        doc = Pipeline(services).run_until_done(settings.owner, args.id, on_progress=_progress(time.monotonic()))
        return _emit(doc, args.out)
    finally:
        services.close()


def cmd_sessions(args: argparse.Namespace, settings: Settings) -> int:
    if settings.backend == "embedded" and not settings.db_path.exists():
        return 0  # no database yet: no sessions
    services = _build(settings)
    try:
        continuation = None
        while True:
            page = sessions.list_sessions(services, settings.owner, limit=50, continuation=continuation)
            for doc in page.items:
                v = views.session_view(doc)
                print(f"{doc.id}  {v['status']:9}  {doc.CreatedAt:%Y-%m-%d %H:%M}  {v['words']:5} words  {v['topic'][:60]}")
            continuation = page.continuation
            if not continuation:
                return 0
    finally:
        services.close()


def cmd_show(args: argparse.Namespace, settings: Settings) -> int:
    _require_store(settings, args.id)
    services = _build(settings)
    try:
        print(json.dumps(sessions.get_session(services, settings.owner, args.id).doc.to_json_dict(), indent=2))
        return 0
    finally:
        services.close()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["host"]:
        from .host import main as host_main

        return host_main(argv[1:])
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    commands = {"write": cmd_write, "revise": cmd_revise, "sessions": cmd_sessions, "show": cmd_show}
    try:
        settings = Settings.from_env(local=True)
        return commands[args.command](args, settings)
    except UsageError as exc:
        print(f"blogwriter: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BlogWriterError as exc:
        print(f"blogwriter: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("blogwriter: interrupted; the session stays where it was (run `blogwriter sessions`)", file=sys.stderr)
        return 130

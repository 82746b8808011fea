"""End-to-end throughput of the in-process pipeline on the embedded backends (offline writer).

    .venv/bin/python bench/bench_pipeline.py [--sessions 10] [--min-words 600] [--max-words 900]

Prints per-session wall time (median, p90), steps per session and handler calls per second.
Numbers only: this machine is shared, so nothing here is asserted.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from blogwriter import sessions  # noqa: E402
from blogwriter.pipeline import Pipeline  # noqa: E402
from blogwriter.settings import Settings  # noqa: E402
from blogwriter.state import PostRequest  # noqa: E402
from blogwriter.wiring import build_services  # noqa: E402

SOURCES = Path(__file__).resolve().parent.parent / "examples" / "sources"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=10)
    ap.add_argument("--min-words", type=int, default=600)
    ap.add_argument("--max-words", type=int, default=900)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as home:
        services = build_services(Settings.from_env({"BLOGWRITER_HOME": home}, local=True))
        pipeline = Pipeline(services)
        times, steps = [], []
        t_all = time.perf_counter()
        for i in range(args.sessions):
            t0 = time.perf_counter()
            stored = sessions.create_session(services, PostRequest(
                topic="How BlogWriter turns a topic into a cited blog post", minWords=args.min_words,
                maxWords=args.max_words, sources=[str(SOURCES)]), "bench")
            doc = pipeline.run_until_done("bench", stored.doc.id)
            times.append(time.perf_counter() - t0)
            steps.append(doc.State.Step.Seq if doc.State.Step else 0)
            assert doc.State.Status.value == "completed", doc.State.Error
        total = time.perf_counter() - t_all
        times.sort()
        print(f"sessions            {args.sessions}")
        print(f"per session median  {statistics.median(times) * 1000:.0f} ms")
        print(f"per session p90     {times[int(0.9 * (len(times) - 1))] * 1000:.0f} ms")
        print(f"steps per session   {statistics.mean(steps):.1f}")
        print(f"steps per second    {sum(steps) / total:.1f}")
        services.close()


if __name__ == "__main__":
    main()

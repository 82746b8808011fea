"""The local Functions host: run ``function_app.py`` on this machine without Core Tools.

``python -m blogwriter host [--port 7071] [--host 127.0.0.1] [--app PATH] [--grace SECONDS]``
(or ``python -m blogwriter.host``). It serves the HTTP routes under ``/api``, polls the queue
triggers' queues, feeds the Cosmos DB trigger from the store's change feed and fires timers,
all against the backends ``BLOGWRITER_*`` settings choose (embedded SQLite by default).

Anonymous access, local-file sources and URLs on private hosts are allowed by default here,
because this host serves the user's own machine; set ``BLOGWRITER_ALLOW_ANONYMOUS=false``,
``BLOGWRITER_ALLOW_LOCAL_FILES=false`` or ``BLOGWRITER_BLOCK_PRIVATE_HOSTS=true`` to change that.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from ..errors import ConfigurationError

DEFAULT_PORT = 7071


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="blogwriter host", description="Run function_app.py locally.")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help="port (default 7071; 0 picks a free one)")
    p.add_argument("--app", type=Path, default=None, help="function_app.py to load (default: the repository's)")
    p.add_argument("--host-json", type=Path, default=None, help="host.json (default: beside the app)")
    p.add_argument("--grace", type=float, default=10.0, help="seconds to let running functions finish on stop")
    p.add_argument("--verbose", action="store_true", help="debug logging (tracebacks of failed invocations)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    # The defaults of Settings.from_env(local=True), set before anything builds services
    # (wiring reads the plain environment); an explicit setting in the environment still wins.
    os.environ.setdefault("BLOGWRITER_ALLOW_ANONYMOUS", "true")
    os.environ.setdefault("BLOGWRITER_ALLOW_LOCAL_FILES", "true")
    os.environ.setdefault("BLOGWRITER_BLOCK_PRIVATE_HOSTS", "false")
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if not args.verbose:
        # The Azure SDKs log every HTTP request at INFO; one line per invocation is ours to print.
        logging.getLogger("azure").setLevel(logging.WARNING)

    from .. import wiring
    from .config import load_host_config
    from .loader import load_app
    from .runner import LocalHost

    try:
        app = load_app(args.app)
        config = load_host_config(args.host_json or app.path.parent / "host.json")
        # The same process-wide bundle the function bodies get from wiring.get_services().
        host = LocalHost(app, config, wiring.get_services())
        url = host.start(args.host, args.port)
    except (ConfigurationError, OSError) as exc:
        print(f"blogwriter host: {exc}", file=sys.stderr)
        return 2

    stop = threading.Event()
    previous: dict[int, object] = {}
    if threading.current_thread() is threading.main_thread():
        def on_signal(signum: int, frame: FrameType | None) -> None:
            stop.set()

        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, on_signal)

    print(f"BlogWriter local host listening on {url}/{config.route_prefix} "
          f"({len(app.functions)} functions from {app.path}); Ctrl-C to stop", flush=True)
    for line in host.describe():
        logging.getLogger("blogwriter.host").info("%s", line.strip())
    try:
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:  # a signal handler could not be installed (not the main thread)
        pass
    finally:
        host.stop(args.grace)
        wiring.reset_services()
        for sig, handler in previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
    print("BlogWriter local host stopped", flush=True)
    return 0

"""Run every trigger of a loaded function app in one process: HTTP, queues, change feed, timers."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from ..services import Services
from .change_feed import ChangeFeedPump
from .config import HostConfig, resolve_setting
from .http_server import FunctionsHTTPServer, build_routes
from .loader import COSMOS, HTTP, QUEUE, TIMER, LoadedApp
from .queue_poller import QueuePoller
from .timers import TimerRunner

log = logging.getLogger("blogwriter.host")


@dataclass
class LocalHost:
    app: LoadedApp
    config: HostConfig
    services: Services
    pollers: list[QueuePoller] = field(default_factory=list)
    feeds: list[ChangeFeedPump] = field(default_factory=list)
    timers: list[TimerRunner] = field(default_factory=list)
    server: FunctionsHTTPServer | None = None
    _server_thread: threading.Thread | None = None

    def __post_init__(self) -> None:
        # Build everything first, so a bad binding refuses to start instead of half-starting.
        for spec in self.app.of_kind(QUEUE):
            self.pollers.append(
                QueuePoller(
                    spec,
                    resolve_setting(str(spec.setting("queueName")), required=True),
                    self.services.queue,
                    self.config.queues,
                    max_polling_interval=self.config.max_polling_interval,
                    processing_timeout=self.config.function_timeout,
                )
            )
        for spec in self.app.of_kind(COSMOS):
            delay = self.config.feed_poll_delay(spec.setting("feedPollDelay"))
            self.feeds.append(ChangeFeedPump(spec, self.services.store, poll_delay=delay))
        for spec in self.app.of_kind(TIMER):
            self.timers.append(TimerRunner(spec))

    def start(self, host: str, port: int) -> str:
        """Bind the HTTP server and start every loop. Returns the base URL."""
        routes = build_routes(self.app.of_kind(HTTP), self.config.route_prefix)
        self.server = FunctionsHTTPServer((host, port), routes)
        self._server_thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.2},
                                               name="http", daemon=True)
        self._server_thread.start()
        for loop in (*self.pollers, *self.feeds, *self.timers):
            loop.start()
        return self.server.url

    def stop(self, grace: float) -> None:
        """Stop taking work everywhere at once, then let running work finish or hand it back."""
        log.info("stopping: no new messages; waiting up to %.0fs for running functions", grace)
        for loop in (*self.pollers, *self.feeds, *self.timers):
            loop.request_stop()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
        for poller in self.pollers:
            poller.stop(grace)
        for loop in (*self.feeds, *self.timers):
            loop.stop(grace)

    def describe(self) -> list[str]:
        lines = []
        for spec in self.app.functions:
            if spec.kind == HTTP:
                methods = ",".join(spec.setting("methods") or ["*"])
                lines.append(f"  {spec.name}: [{methods}] /{self.config.route_prefix}/{spec.setting('route') or spec.name}")
            else:
                target = spec.setting("queueName") or spec.setting("containerName") or spec.setting("schedule")
                lines.append(f"  {spec.name}: {spec.kind} {resolve_setting(str(target), required=False)}")
        return lines

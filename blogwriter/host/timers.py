"""Fire timer triggers on their schedule (UTC, as the Functions host does by default).

Supported schedules: a six-field NCRONTAB expression (``sec min hour day month day-of-week``)
whose second, minute and hour fields use ``*``, ``*/N``, ``N``, ``A-B``, ``A-B/N`` or lists of
those, and whose day, month and day-of-week fields are ``*``; or a TimeSpan (``hh:mm:ss``, the
App Service plan form) meaning "every that long". Anything else is refused at start with a
clear message rather than fired at the wrong times. ``runOnStartup`` is honoured; ``useMonitor``
(catching up on missed runs after downtime) is not.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Callable

from azure.functions.timer import TimerRequest

from ..errors import ConfigurationError
from .config import timespan_seconds
from .loader import FunctionSpec, invoke

log = logging.getLogger("blogwriter.host")


def _field(expr: str, low: int, high: int) -> frozenset[int]:
    values: set[int] = set()
    for part in expr.split(","):
        rng, _, step_text = part.partition("/")
        step = int(step_text) if step_text else 1
        if step < 1:
            raise ValueError(f"bad step in {expr!r}")
        if rng == "*":
            start, end = low, high
        elif "-" in rng:
            a, b = rng.split("-", 1)
            start, end = int(a), int(b)
        else:
            start = int(rng)
            end = high if step_text else start
        if not (low <= start <= end <= high):
            raise ValueError(f"{expr!r} is out of range {low}-{high}")
        values.update(range(start, end + 1, step))
    return frozenset(values)


@dataclass(frozen=True)
class Schedule:
    seconds: frozenset[int] | None = None
    minutes: frozenset[int] | None = None
    hours: frozenset[int] | None = None
    every: float | None = None

    @classmethod
    def parse(cls, expression: str) -> "Schedule":
        text = expression.strip()
        if ":" in text and " " not in text:
            every = timespan_seconds(text)
            if every <= 0:
                raise ConfigurationError(f"timer schedule {expression!r} must be positive")
            return cls(every=every)
        fields = text.split()
        if len(fields) != 6:
            raise ConfigurationError(f"timer schedule {expression!r}: expected six NCRONTAB fields")
        if any(f != "*" for f in fields[3:]):
            raise ConfigurationError(
                f"timer schedule {expression!r}: the local host supports only '*' in the day, month "
                "and day-of-week fields"
            )
        try:
            return cls(seconds=_field(fields[0], 0, 59), minutes=_field(fields[1], 0, 59), hours=_field(fields[2], 0, 23))
        except ValueError as exc:
            raise ConfigurationError(f"timer schedule {expression!r}: {exc}") from None

    def next_after(self, moment: datetime) -> datetime:
        """The first firing time strictly after ``moment``."""
        if self.every is not None:
            return moment + timedelta(seconds=self.every)
        assert self.seconds and self.minutes and self.hours
        t = moment.replace(microsecond=0) + timedelta(seconds=1)
        for _ in range(48 * 60):  # at most two days of minutes; every schedule here fires daily
            if t.hour in self.hours and t.minute in self.minutes:
                later = [s for s in sorted(self.seconds) if s >= t.second]
                if later:
                    return t.replace(second=later[0])
            t = (t + timedelta(minutes=1)).replace(second=0)
        raise ConfigurationError("timer schedule never fires")  # unreachable for valid fields


class TimerRunner:
    def __init__(self, function: FunctionSpec, *, clock: Callable[[], datetime] | None = None) -> None:
        self.function = function
        self.schedule = Schedule.parse(str(function.setting("schedule")))
        self._clock = clock or (lambda: datetime.now(timezone.utc))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"timer-{function.name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def request_stop(self) -> None:
        self._stop.set()

    def stop(self, grace: float) -> None:
        self._stop.set()
        self._thread.join(timeout=grace)

    def _fire(self, *, past_due: bool) -> None:
        invoke(self.function, TimerRequest(past_due=past_due), detail="timer")

    def _run(self) -> None:
        if self.function.setting("runOnStartup"):
            self._fire(past_due=False)
        due = self.schedule.next_after(self._clock())
        while not self._stop.is_set():
            wait = (due - self._clock()).total_seconds()
            if wait > 0 and self._stop.wait(min(wait, 5.0)):
                break
            if wait > 0:
                continue  # re-check the clock in small steps so a clock jump is noticed
            now = self._clock()
            self._fire(past_due=(now - due).total_seconds() > 60)
            due = self.schedule.next_after(max(now, due))

"""The bundle of ports a handler works with. Handlers never read settings or build clients."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Callable

from .models.base import Model
from .queues.base import TaskQueue
from .settings import Settings
from .sources import SourceLoader
from .state import utcnow
from .store.base import SessionStore
from .usage import TokenMeter


@dataclass(frozen=True)
class ModelSet:
    """One model per agent (a cheap one may research, a strong one write)."""

    researcher: Model
    author: Model
    reviewer: Model

    @classmethod
    def single(cls, model: Model) -> "ModelSet":
        return cls(researcher=model, author=model, reviewer=model)

    def close(self) -> None:
        for m in {id(m): m for m in (self.researcher, self.author, self.reviewer)}.values():
            m.close()


@dataclass
class Services:
    store: SessionStore
    queue: TaskQueue
    models: ModelSet
    sources: SourceLoader
    settings: Settings
    meter: TokenMeter = field(default_factory=TokenMeter)
    clock: Callable[[], datetime] = utcnow

    def close(self) -> None:
        self.models.close()
        self.queue.close()
        self.store.close()

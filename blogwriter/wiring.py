"""The composition root: settings in, a :class:`Services` bundle out.

The only place that picks backends. Azure SDK and OpenAI imports stay inside the branches that
need them, so the embedded default starts fast and works without cloud packages configured.
"""

from __future__ import annotations

import threading

from .models.offline import OfflineModel
from .services import ModelSet, Services
from .settings import Settings
from .sources import SourceLoader
from .usage import TokenMeter

_lock = threading.Lock()
_services: Services | None = None


def build_models(settings: Settings) -> ModelSet:
    if settings.models.configured:
        from .models.openai import build_model_set

        return build_model_set(settings.models)
    return ModelSet.single(OfflineModel())


def build_services(settings: Settings) -> Services:
    if settings.backend == "azure":
        from .queues.azure import AzureTaskQueue
        from .store.cosmos import CosmosSessionStore

        store, queue = CosmosSessionStore.from_settings(settings), AzureTaskQueue.from_settings(settings)
    else:
        from .queues.sqlite import SqliteTaskQueue
        from .store.sqlite import SqliteSessionStore

        settings.home.mkdir(parents=True, exist_ok=True)
        store, queue = SqliteSessionStore(settings.db_path), SqliteTaskQueue(settings.db_path)
    return Services(
        store=store,
        queue=queue,
        models=build_models(settings),
        sources=SourceLoader(
            allow_local_files=settings.allow_local_files,
            roots=settings.source_roots,
            fetch_timeout=settings.fetch_timeout_seconds,
            fetch_max_bytes=settings.fetch_max_bytes,
            block_private_hosts=settings.block_private_hosts,
        ),
        settings=settings,
        meter=TokenMeter(settings.process_token_cap),
    )


def get_services() -> Services:
    """The process-wide bundle the Functions app uses, built once from the environment."""
    global _services
    with _lock:
        if _services is None:
            _services = build_services(Settings.from_env())
        return _services


def reset_services() -> None:
    global _services
    with _lock:
        if _services is not None:
            _services.close()
        _services = None

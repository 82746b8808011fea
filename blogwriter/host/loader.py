"""Load ``function_app.py`` through azure-functions and call its functions as the host would.

The Functions host indexes a Python v2 app by importing the script and asking the
``FunctionRegister`` instance for ``get_functions()``; we do the same, then keep for each function
the trigger's settings (``get_dict_repr()``), its callable and the name of its trigger argument.
"""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import json
import logging
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import azure.functions as func

from ..errors import ConfigurationError

log = logging.getLogger("blogwriter.host")

HTTP = "httpTrigger"
QUEUE = "queueTrigger"
COSMOS = "cosmosDBTrigger"
TIMER = "timerTrigger"
SUPPORTED = (HTTP, QUEUE, COSMOS, TIMER)


def default_app_path() -> Path:
    """``function_app.py`` at the repository root (the parent of the ``blogwriter`` package)."""
    return Path(__file__).resolve().parents[2] / "function_app.py"


@dataclass(frozen=True)
class FunctionSpec:
    """One indexed function: what triggers it and how to call it."""

    name: str
    kind: str
    arg_name: str
    trigger: dict[str, Any]
    call: Any = field(repr=False)
    retry: dict[str, Any] | None = None

    def setting(self, key: str, default: Any = None) -> Any:
        return self.trigger.get(key, default)


@dataclass(frozen=True)
class LoadedApp:
    path: Path
    functions: list[FunctionSpec]

    def of_kind(self, kind: str) -> list[FunctionSpec]:
        return [f for f in self.functions if f.kind == kind]


def _plain(value: Any) -> Any:
    """get_dict_repr() holds enums; round-trip through JSON as the host reads function.json."""
    return json.loads(json.dumps(value, default=str))


def find_app(module: Any) -> func.FunctionRegister:
    apps = [v for v in vars(module).values() if isinstance(v, func.FunctionRegister)]
    if len(apps) != 1:
        raise ConfigurationError(f"expected exactly one FunctionApp in {module.__name__}, found {len(apps)}")
    return apps[0]


def import_script(path: Path) -> Any:
    """Import ``path`` as a fresh module (like the worker, with its folder on ``sys.path``)."""
    path = path.resolve()
    if not path.is_file():
        raise ConfigurationError(f"function app not found: {path}")
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    name = f"_blogwriter_app_{uuid.uuid4().hex[:8]}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ConfigurationError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def index(app: func.FunctionRegister) -> list[FunctionSpec]:
    specs: list[FunctionSpec] = []
    for function in app.get_functions():
        trigger = function.get_trigger()
        if trigger is None:
            raise ConfigurationError(f"function {function.get_function_name()} has no trigger")
        kind = trigger.get_binding_name()
        others = [b for b in function.get_bindings() if b is not trigger and b.get_binding_name() != "http"]
        if kind not in SUPPORTED or others:
            # Better to refuse at start than to run a function with a binding silently missing.
            raise ConfigurationError(
                f"function {function.get_function_name()}: the local host supports only http, queue, "
                f"cosmosDB and timer triggers without extra bindings (got {kind})"
            )
        retry = function.get_settings_dict("retry_policy")
        specs.append(
            FunctionSpec(
                name=str(function.get_function_name()),
                kind=kind,
                arg_name=trigger.name,
                trigger=_plain(trigger.get_dict_repr()),
                call=function.get_user_function(),
                retry=_plain(retry) if retry else None,
            )
        )
    return specs


def load_app(path: Path | None = None) -> LoadedApp:
    path = (path or default_app_path()).resolve()
    return LoadedApp(path=path, functions=index(find_app(import_script(path))))


def invoke(spec: FunctionSpec, argument: Any, *, detail: str = "") -> tuple[bool, Any]:
    """Call a function with its trigger argument; log one line. Returns (succeeded, result or error).

    Exceptions are caught and logged, never raised: the caller decides what a failure means
    (leave a queue message to reappear, answer 500, retry a change-feed batch).
    """
    invocation = uuid.uuid4()
    started = time.perf_counter()
    try:
        result = spec.call(**{spec.arg_name: argument})
        if inspect.isawaitable(result):
            result = asyncio.run(_await(result))
    except Exception as exc:
        elapsed = (time.perf_counter() - started) * 1000
        log.error(
            "Executed 'Functions.%s' (Failed, Id=%s, Duration=%.0fms)%s: %s: %s",
            spec.name, invocation, elapsed, f" {detail}" if detail else "", type(exc).__name__, exc,
            exc_info=log.isEnabledFor(logging.DEBUG),
        )
        return False, exc
    elapsed = (time.perf_counter() - started) * 1000
    log.info("Executed 'Functions.%s' (Succeeded, Id=%s, Duration=%.0fms)%s",
             spec.name, invocation, elapsed, f" {detail}" if detail else "")
    return True, result


async def _await(awaitable: Any) -> Any:
    return await awaitable

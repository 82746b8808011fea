"""function_app.py indexes as the Functions host will see it, and host.json / local settings match it."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from host_process import REPO

import azure.functions as func
from blogwriter.host.config import load_host_config
from blogwriter.host.loader import find_app, import_script
from blogwriter.host.timers import Schedule
from blogwriter.settings import INTAKE_QUEUE, RESEARCH_QUEUE, REVIEW_QUEUE, WRITE_QUEUE

APP = REPO / "function_app.py"

HTTP_ROUTES = {
    "create_session": ("sessions", ["POST"]),
    "list_sessions": ("sessions", ["GET"]),
    "get_session": ("sessions/{id}", ["GET"]),
    "delete_session": ("sessions/{id}", ["DELETE"]),
    "get_draft": ("sessions/{id}/draft", ["GET"]),
    "add_feedback": ("sessions/{id}/feedback", ["POST"]),
    "cancel_session": ("sessions/{id}/cancel", ["POST"]),
    "health": ("health", ["GET"]),
}
QUEUE_TRIGGERS = {
    "intake_request": INTAKE_QUEUE,
    "research_task": RESEARCH_QUEUE,
    "write_task": WRITE_QUEUE,
    "review_task": REVIEW_QUEUE,
    "intake_request_poison": f"{INTAKE_QUEUE}-poison",
    "research_task_poison": f"{RESEARCH_QUEUE}-poison",
    "write_task_poison": f"{WRITE_QUEUE}-poison",
    "review_task_poison": f"{REVIEW_QUEUE}-poison",
}


@pytest.fixture(scope="module")
def functions() -> dict[str, func.decorators.function_app.Function]:
    # get_functions() may be called once per app instance, so index a fresh import here.
    app = find_app(import_script(APP))
    return {f.get_function_name(): f for f in app.get_functions()}


def trigger(function: Any) -> dict[str, Any]:
    return json.loads(json.dumps(function.get_trigger().get_dict_repr(), default=str))


def test_the_app_has_exactly_the_expected_functions(functions: dict[str, Any]) -> None:
    assert set(functions) == set(HTTP_ROUTES) | set(QUEUE_TRIGGERS) | {"route_changes", "sweep_stuck_steps"}


@pytest.mark.parametrize("name", sorted(HTTP_ROUTES))
def test_http_function_route_methods_and_anonymous_auth(functions: dict[str, Any], name: str) -> None:
    route, methods = HTTP_ROUTES[name]
    t = trigger(functions[name])
    assert functions[name].is_http_function()
    assert t["type"] == "httpTrigger"
    assert t["route"] == route
    assert [m.upper() for m in t["methods"]] == methods
    assert t["authLevel"].upper() == "ANONYMOUS"  # identity comes from App Service auth headers


@pytest.mark.parametrize("name", sorted(QUEUE_TRIGGERS))
def test_queue_function_listens_on_its_queue(functions: dict[str, Any], name: str) -> None:
    t = trigger(functions[name])
    assert t["type"] == "queueTrigger"
    assert t["queueName"] == QUEUE_TRIGGERS[name]
    assert t["connection"] == "AzureWebJobsStorage"


def test_change_feed_trigger_uses_bundle_4_names_and_its_own_lease_prefix(functions: dict[str, Any]) -> None:
    t = trigger(functions["route_changes"])
    assert t["type"] == "cosmosDBTrigger"
    assert t["connection"] == "COSMOS_CONNECTION"
    assert t["databaseName"] == "%COSMOS_DATABASE%"
    assert t["containerName"] == "%COSMOS_CONTAINER%"
    assert t["leaseContainerName"] == "%COSMOS_LEASE_CONTAINER%"
    assert t["createLeaseContainerIfNotExists"] is True
    assert t["leaseContainerPrefix"] == "router-"
    assert not {"collectionName", "connectionStringSetting", "leaseCollectionName"} & set(t)  # bundle 2/3 names
    retry = functions["route_changes"].get_settings_dict("retry_policy")
    assert retry and retry["strategy"] == "exponential_backoff"


def test_every_cosmos_trigger_has_a_unique_lease_prefix(functions: dict[str, Any]) -> None:
    prefixes = [trigger(f)["leaseContainerPrefix"] for f in functions.values() if trigger(f)["type"] == "cosmosDBTrigger"]
    assert prefixes and len(prefixes) == len(set(prefixes))


def test_sweeper_timer_fires_every_minute(functions: dict[str, Any]) -> None:
    t = trigger(functions["sweep_stuck_steps"])
    assert t["type"] == "timerTrigger"
    schedule = Schedule.parse(t["schedule"])
    start = datetime(2025, 1, 1, 12, 0, 0, tzinfo=timezone.utc)
    first = schedule.next_after(start)
    assert first == start + timedelta(minutes=1)
    assert schedule.next_after(first) - first == timedelta(minutes=1)


def test_importing_the_app_builds_no_services(monkeypatch: pytest.MonkeyPatch) -> None:
    # A setting that would make building services fail: indexing must not notice it.
    monkeypatch.setenv("BLOGWRITER_BACKEND", "no-such-backend")
    app = find_app(import_script(APP))
    assert len(app.get_functions()) == len(HTTP_ROUTES) + len(QUEUE_TRIGGERS) + 2


def test_host_json_has_bundle_4_and_plain_queue_messages() -> None:
    raw = json.loads((REPO / "host.json").read_text())
    assert raw["version"] == "2.0"
    assert raw["extensionBundle"] == {"id": "Microsoft.Azure.Functions.ExtensionBundle", "version": "[4.*, 5.0.0)"}
    queues = raw["extensions"]["queues"]
    assert queues["messageEncoding"] == "none"
    assert set(queues) >= {"batchSize", "newBatchThreshold", "maxDequeueCount", "maxPollingInterval", "visibilityTimeout"}
    config = load_host_config(REPO / "host.json", env={})
    assert config.queues.maxDequeueCount == 5
    assert config.queues.maxPollingInterval == 2.0
    assert config.function_timeout == 600.0
    assert config.route_prefix == "api"


def test_local_settings_example_lists_every_setting_the_app_reads() -> None:
    values = json.loads((REPO / "local.settings.example.json").read_text())["Values"]
    source = (REPO / "blogwriter" / "settings.py").read_text()
    read = set(re.findall(r'env\.get\("([A-Za-z_]+)"\)', source)) | set(re.findall(r'env, "([A-Za-z_]+)"', source))
    assert read, "settings.py no longer reads env the way this test expects"
    assert read <= set(values), f"missing: {sorted(read - set(values))}"
    bindings = (REPO / "function_app.py").read_text()
    assert set(re.findall(r'"%([A-Z_]+)%"', bindings)) <= set(values)
    assert values["FUNCTIONS_WORKER_RUNTIME"] == "python"
    assert values["AzureWebJobsStorage"] == "UseDevelopmentStorage=true"
    # Our own sends must be decodable by the trigger: same encoding on both sides.
    assert values["BLOGWRITER_QUEUE_ENCODING"] == json.loads((REPO / "host.json").read_text())["extensions"]["queues"]["messageEncoding"]


def test_local_settings_file_is_not_committed() -> None:
    assert "local.settings.json" in (REPO / ".gitignore").read_text().split()

"""BlogWriter's Azure Functions bindings (Python v2 model). Bindings only: each body parses its
trigger, calls one handler in ``blogwriter``, returns. Services are built on first use, never at
import, so indexing needs no settings. Queue bodies are plain text (host.json messageEncoding none).
"""

from __future__ import annotations

import logging

import azure.functions as func

from blogwriter import http_api, router, sessions, wiring, worker
from blogwriter.settings import INTAKE_QUEUE, RESEARCH_QUEUE, REVIEW_QUEUE, WRITE_QUEUE

STORAGE = "AzureWebJobsStorage"
app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)  # identity: App Service auth headers


def _http(handler: http_api.Handler, req: func.HttpRequest, *, anonymous: bool = False) -> func.HttpResponse:
    request = http_api.ApiRequest(
        req.method, req.url, dict(req.route_params), dict(req.params), dict(req.headers), req.get_body()
    )
    res = http_api.respond(handler, request, wiring.get_services, anonymous=anonymous)
    return func.HttpResponse(res.body, status_code=res.status, headers=res.headers, mimetype=res.mimetype)


def _text(msg: func.QueueMessage) -> str:
    return msg.get_body().decode("utf-8")


@app.route(route="sessions", methods=["POST"])
def create_session(req: func.HttpRequest) -> func.HttpResponse:
    return _http(http_api.create_session, req)


@app.route(route="sessions", methods=["GET"])
def list_sessions(req: func.HttpRequest) -> func.HttpResponse:
    return _http(http_api.list_sessions, req)


@app.route(route="sessions/{id}", methods=["GET"])
def get_session(req: func.HttpRequest) -> func.HttpResponse:
    return _http(http_api.get_session, req)


@app.route(route="sessions/{id}", methods=["DELETE"])
def delete_session(req: func.HttpRequest) -> func.HttpResponse:
    return _http(http_api.delete_session, req)


@app.route(route="sessions/{id}/draft", methods=["GET"])
def get_draft(req: func.HttpRequest) -> func.HttpResponse:
    return _http(http_api.get_draft, req)


@app.route(route="sessions/{id}/feedback", methods=["POST"])
def add_feedback(req: func.HttpRequest) -> func.HttpResponse:
    return _http(http_api.add_feedback, req)


@app.route(route="sessions/{id}/cancel", methods=["POST"])
def cancel_session(req: func.HttpRequest) -> func.HttpResponse:
    return _http(http_api.cancel_session, req)


@app.route(route="health", methods=["GET"])
def health(req: func.HttpRequest) -> func.HttpResponse:
    return _http(http_api.health, req, anonymous=True)


@app.queue_trigger(arg_name="msg", queue_name=INTAKE_QUEUE, connection=STORAGE)
def intake_request(msg: func.QueueMessage) -> None:
    sessions.intake(wiring.get_services(), _text(msg))


@app.queue_trigger(arg_name="msg", queue_name=RESEARCH_QUEUE, connection=STORAGE)
def research_task(msg: func.QueueMessage) -> None:
    worker.run_task(wiring.get_services(), RESEARCH_QUEUE, _text(msg), dequeue_count=msg.dequeue_count or 1)


@app.queue_trigger(arg_name="msg", queue_name=WRITE_QUEUE, connection=STORAGE)
def write_task(msg: func.QueueMessage) -> None:
    worker.run_task(wiring.get_services(), WRITE_QUEUE, _text(msg), dequeue_count=msg.dequeue_count or 1)


@app.queue_trigger(arg_name="msg", queue_name=REVIEW_QUEUE, connection=STORAGE)
def review_task(msg: func.QueueMessage) -> None:
    worker.run_task(wiring.get_services(), REVIEW_QUEUE, _text(msg), dequeue_count=msg.dequeue_count or 1)


@app.queue_trigger(arg_name="msg", queue_name=f"{INTAKE_QUEUE}-poison", connection=STORAGE)
def intake_request_poison(msg: func.QueueMessage) -> None:
    # No session exists for a request that never validated: log it for whoever sent it.
    logging.error("blog-requests message %s gave up after repeated failures (see earlier errors): %.500s", msg.id, _text(msg))


@app.queue_trigger(arg_name="msg", queue_name=f"{RESEARCH_QUEUE}-poison", connection=STORAGE)
def research_task_poison(msg: func.QueueMessage) -> None:
    worker.on_poison(wiring.get_services(), RESEARCH_QUEUE, _text(msg))


@app.queue_trigger(arg_name="msg", queue_name=f"{WRITE_QUEUE}-poison", connection=STORAGE)
def write_task_poison(msg: func.QueueMessage) -> None:
    worker.on_poison(wiring.get_services(), WRITE_QUEUE, _text(msg))


@app.queue_trigger(arg_name="msg", queue_name=f"{REVIEW_QUEUE}-poison", connection=STORAGE)
def review_task_poison(msg: func.QueueMessage) -> None:
    worker.on_poison(wiring.get_services(), REVIEW_QUEUE, _text(msg))


# Database and containers come from app settings (%NAME%), the same ones the store uses.
@app.retry(strategy="exponential_backoff", max_retry_count="5", minimum_interval="00:00:02", maximum_interval="00:01:00")
@app.cosmos_db_trigger(
    arg_name="docs", connection="COSMOS_CONNECTION", database_name="%COSMOS_DATABASE%",
    container_name="%COSMOS_CONTAINER%", lease_container_name="%COSMOS_LEASE_CONTAINER%",
    create_lease_container_if_not_exists=True, lease_container_prefix="router-", feed_poll_delay=1000,
)
def route_changes(docs: func.DocumentList) -> None:
    router.on_changes(wiring.get_services(), [doc.to_dict() for doc in docs])


@app.timer_trigger(arg_name="timer", schedule="0 */1 * * * *", run_on_startup=False)
def sweep_stuck_steps(timer: func.TimerRequest) -> None:
    router.sweep(wiring.get_services())

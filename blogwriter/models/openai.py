"""The real model behind the seam: the official ``openai`` SDK (Responses API or Chat Completions).

One :class:`OpenAIModel` answers one agent's requests with structured outputs: the pydantic
output type becomes a strict JSON schema, the answer is validated against it, and a bad answer
is retried once with the validation error in the prompt. Every call is stateless
(``store=False``, never ``previous_response_id``): continuity lives in the session document.

Which client, base URL and credentials a model uses is decided in :mod:`.providers`;
:func:`build_model_set` and :func:`block_remote_model_calls` are re-exported here so callers
need one import.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Literal

import openai
from pydantic import BaseModel, ValidationError

from ..briefs import ResearchOutput
from ..errors import ModelError
from ..state import Usage
from .base import Model, ModelRequest, ModelResponse, T

if TYPE_CHECKING:
    from ..services import ModelSet
    from ..settings import ModelSettings

try:  # the SDK's own converter (private, but the exact rules the API enforces)
    from openai.lib._pydantic import to_strict_json_schema as _sdk_strict_schema
except ImportError:  # pragma: no cover - depends on the installed SDK version
    _sdk_strict_schema = None

Api = Literal["responses", "chat"]
ChatTokenParam = Literal["max_tokens", "max_completion_tokens"]

# How much of a rejected answer to quote back to the model when asking again.
_BAD_ANSWER_EXCERPT = 1_500


class ModelAnswerError(ModelError):
    """The model's answer was unusable. ``usage`` holds the tokens it cost anyway."""

    def __init__(self, message: str, *, usage: Usage) -> None:
        super().__init__(message)
        self.usage = usage


def strict_json_schema(output_type: type[BaseModel]) -> dict[str, Any]:
    """The strict-mode JSON schema of a pydantic type (all required, no extras, null via anyOf)."""
    if _sdk_strict_schema is not None:
        return _sdk_strict_schema(output_type)
    return _make_strict(output_type.model_json_schema())


def _make_strict(schema: Any) -> Any:
    """Minimal stand-in for the SDK helper, for SDK versions that lack it."""
    if isinstance(schema, list):
        return [_make_strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _make_strict(v) for k, v in schema.items() if k != "default"}
    if out.get("type") == "object" and "additionalProperties" not in out:
        out["additionalProperties"] = False
    if isinstance(out.get("properties"), dict):
        out["required"] = list(out["properties"])
    if "$ref" in out and len(out) > 1:
        # Strict mode rejects siblings of $ref: keep the reference alone.
        out = {"$ref": out["$ref"]}
    return out


def _int(value: Any) -> int:
    return value if isinstance(value, int) else 0


def _usage(
    usage: Any, *, input_name: str, output_name: str, details_name: str, calls: int
) -> Usage:
    """Token figures of one SDK call; any figure the server left out counts as 0."""
    if usage is None:
        return Usage(Calls=calls)
    inp = _int(getattr(usage, input_name, 0))
    out = _int(getattr(usage, output_name, 0))
    details = getattr(usage, details_name, None)
    reasoning = _int(getattr(details, "reasoning_tokens", 0)) if details is not None else 0
    total = _int(getattr(usage, "total_tokens", 0)) or inp + out
    return Usage(InputTokens=inp, OutputTokens=out, ReasoningTokens=reasoning, TotalTokens=total, Calls=calls)


@dataclass
class _Answer:
    """Text of one attempt, what it cost, and the web citations that came with it."""

    text: str
    usage: Usage
    model: str = ""
    citations: list[dict[str, Any]] = field(default_factory=list)
    incomplete: str | None = None  # why the answer stopped early, if it did


class OpenAIModel(Model):
    """Answers requests with one model (or Azure deployment) through an ``openai.OpenAI`` client.

    ``web_search`` says whether the provider offers the hosted web search tool; a request uses
    it only when it also asks for it. ``max_output_tokens`` caps the request's own allowance.
    """

    def __init__(
        self,
        client: openai.OpenAI,
        model: str,
        *,
        api: Api = "responses",
        web_search: bool = False,
        provider: str = "openai",
        max_output_tokens: int | None = None,
        chat_token_param: ChatTokenParam = "max_completion_tokens",
        owns_client: bool = True,
    ) -> None:
        if api == "chat" and web_search:
            raise ValueError("hosted web search needs the Responses API")
        self.client = client
        self.model = model
        self.api: Api = api
        self.web_search = self.searches_web = web_search
        self.provider = provider
        self.max_output_tokens = max_output_tokens
        self.chat_token_param: ChatTokenParam = chat_token_param
        self.owns_client = owns_client
        self.name = f"{provider}:{model}"

    # -- the seam ---------------------------------------------------------------------------

    def respond(self, request: ModelRequest[T]) -> ModelResponse[T]:
        schema = strict_json_schema(request.output_type)
        limit = request.max_output_tokens
        if self.max_output_tokens is not None:
            limit = min(limit, self.max_output_tokens)
        use_web = bool(request.web_search and self.web_search)

        prompt = request.prompt
        usage = Usage()
        for attempt in (1, 2):
            try:
                answer = self._call(request, prompt, schema, limit, use_web)
            except ModelError as exc:
                if not usage.Calls:
                    raise
                # The first attempt's tokens were spent: keep them countable.
                raise ModelAnswerError(f"{exc} (on the retry after an invalid answer)", usage=usage) from exc
            usage = usage.plus(answer.usage)
            if answer.incomplete:
                # A truncated answer would be truncated again: say why instead of retrying.
                raise ModelAnswerError(
                    f"{self.name} stopped before finishing its answer ({answer.incomplete}); "
                    f"max output tokens was {limit}",
                    usage=usage,
                )
            try:
                output = request.output_type.model_validate_json(answer.text)
            except ValidationError as exc:
                problem = _describe(exc)
                if attempt == 2:
                    raise ModelAnswerError(
                        f"{self.name} answered twice with output that does not match "
                        f"{request.output_type.__name__}: {problem}",
                        usage=usage,
                    ) from exc
                prompt = _retry_prompt(request.prompt, answer.text, problem)
                continue
            if use_web and isinstance(output, ResearchOutput):
                output = _attach_citations(output, answer.text, answer.citations)  # type: ignore[assignment]
            return ModelResponse(output=output, usage=usage, model=answer.model or self.model)
        raise AssertionError("unreachable")  # pragma: no cover

    def estimate_tokens(self, request: ModelRequest) -> int:
        """The base guess, plus the schema sent with every call, with this model's output cap."""
        limit = request.max_output_tokens
        if self.max_output_tokens is not None:
            limit = min(limit, self.max_output_tokens)
        schema = json.dumps(strict_json_schema(request.output_type))
        return (len(request.instructions) + len(request.prompt) + len(schema)) // 4 + limit

    def close(self) -> None:
        if self.owns_client:
            self.client.close()

    # -- one HTTP exchange (plus the SDK's own retries) --------------------------------------

    def _call(self, request: ModelRequest[Any], prompt: str, schema: dict[str, Any], limit: int,
              use_web: bool) -> _Answer:
        name = request.output_type.__name__
        try:
            if self.api == "chat":
                return self._chat(request, prompt, schema, name, limit)
            return self._responses(request, prompt, schema, name, limit, use_web)
        except openai.APIStatusError as exc:
            raise ModelError(
                f"{self.provider} returned HTTP {exc.status_code} for model {self.model!r}: {_error_message(exc)}"
            ) from exc
        except openai.APITimeoutError as exc:
            raise ModelError(
                f"{self.provider} did not answer in time for model {self.model!r} (retries exhausted)"
            ) from exc
        except openai.APIConnectionError as exc:
            raise ModelError(
                f"cannot reach {self.provider} at {self.client.base_url} for model {self.model!r}: {exc}"
            ) from exc

    def _responses(self, request: ModelRequest[Any], prompt: str, schema: dict[str, Any], name: str,
                   limit: int, use_web: bool) -> _Answer:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "instructions": request.instructions,
            "input": prompt,
            "store": False,
            "max_output_tokens": limit,
            "text": {"format": {"type": "json_schema", "name": name, "schema": schema, "strict": True}},
        }
        if use_web:
            kwargs["tools"] = [{"type": "web_search"}]
        raw = self.client.responses.with_raw_response.create(**kwargs)
        response = raw.parse()
        usage = _usage(response.usage, input_name="input_tokens", output_name="output_tokens",
                       details_name="output_tokens_details", calls=raw.retries_taken + 1)
        texts: list[str] = []
        citations: list[dict[str, Any]] = []
        refusal = ""
        for item in response.output or []:
            if getattr(item, "type", None) != "message":
                continue  # web_search_call and reasoning items carry no answer text
            for part in item.content or []:
                if part.type == "output_text":
                    offset = sum(len(t) for t in texts)
                    for note in part.annotations or []:
                        if getattr(note, "type", None) == "url_citation":
                            citations.append({"url": note.url, "title": note.title,
                                              "start": offset + note.start_index, "end": offset + note.end_index})
                    texts.append(part.text or "")
                elif part.type == "refusal":
                    refusal = getattr(part, "refusal", "") or ""
        incomplete = None
        if response.status == "incomplete":
            details = response.incomplete_details
            incomplete = (details.reason if details is not None else None) or "incomplete"
        text = "".join(texts)
        if not text and refusal:
            text = refusal  # fails validation and is retried once like any other bad answer
        return _Answer(text, usage, model=response.model or "", citations=citations, incomplete=incomplete)

    def _chat(self, request: ModelRequest[Any], prompt: str, schema: dict[str, Any], name: str,
              limit: int) -> _Answer:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": [
                {"role": "system", "content": request.instructions},
                {"role": "user", "content": prompt},
            ],
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": name, "schema": schema, "strict": True},
            },
            self.chat_token_param: limit,
        }
        raw = self.client.chat.completions.with_raw_response.create(**kwargs)
        completion = raw.parse()
        usage = _usage(completion.usage, input_name="prompt_tokens", output_name="completion_tokens",
                       details_name="completion_tokens_details", calls=raw.retries_taken + 1)
        if not completion.choices:
            return _Answer("", usage, model=completion.model or "")
        choice = completion.choices[0]
        message = choice.message
        text = message.content or message.refusal or ""
        incomplete = "length" if choice.finish_reason == "length" else None
        return _Answer(text, usage, model=completion.model or "", incomplete=incomplete)


def _error_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
    return exc.message


def _describe(exc: ValidationError) -> str:
    """A short, model-readable account of what was wrong with an answer."""
    problems = []
    for err in exc.errors()[:8]:
        where = ".".join(str(p) for p in err.get("loc", ())) or "answer"
        problems.append(f"{where}: {err.get('msg', 'invalid')}")
    return "; ".join(problems)


def _retry_prompt(prompt: str, bad_answer: str, problem: str) -> str:
    excerpt = bad_answer[:_BAD_ANSWER_EXCERPT] + ("..." if len(bad_answer) > _BAD_ANSWER_EXCERPT else "")
    return (
        f"{prompt}\n\n"
        "Your previous answer was rejected because it is not valid JSON for the required schema.\n"
        f"Validation error: {problem}\n"
        f"Previous answer (excerpt): {excerpt}\n"
        "Answer again with a single JSON object that matches the schema exactly."
    )


def _attach_citations(output: ResearchOutput, text: str, citations: list[dict[str, Any]]) -> ResearchOutput:
    """Give web findings the source the hosted search cited for them; drop those without one.

    Annotations point at character spans of the answer text (the JSON itself). A finding owns
    the span from where its claim appears up to where the next finding's claim appears, and
    takes the first citation that starts inside it.
    """
    starts = _finding_starts(output, text)
    kept = []
    for i, fact in enumerate(output.findings):
        if fact.passage is not None:
            kept.append(fact)
            continue
        if not fact.url:
            begin = starts[i]
            end = next((s for s in starts[i + 1:] if s >= 0), len(text))
            cited = next((c for c in citations if begin >= 0 and begin <= c["start"] < end), None)
            if cited is None:
                continue  # a web finding nobody can trace back to a page is worthless
            fact = fact.model_copy(update={"url": cited["url"], "title": fact.title or cited["title"]})
        kept.append(fact)
    return output.model_copy(update={"findings": kept})


def _finding_starts(output: ResearchOutput, text: str) -> list[int]:
    """Where each finding's claim sits in the raw JSON answer (-1 when it cannot be found)."""
    starts: list[int] = []
    cursor = 0
    for fact in output.findings:
        needle = json.dumps(fact.claim)  # the claim as it is escaped inside the JSON text
        at = text.find(needle, cursor)
        if at < 0:
            needle = json.dumps(fact.claim, ensure_ascii=False)
            at = text.find(needle, cursor)
        starts.append(at)
        if at >= 0:
            cursor = at + len(needle)
    return starts


# -- re-exports (providers imports this module, so these forward at call time) -------------------


def build_model_set(settings: "ModelSettings", *, azure_token_provider: Callable[[], str] | None = None) -> "ModelSet":
    """See :func:`blogwriter.models.providers.build_model_set`."""
    from .providers import build_model_set as build

    return build(settings, azure_token_provider=azure_token_provider)


def block_remote_model_calls(enabled: bool = True) -> None:
    """See :func:`blogwriter.models.providers.block_remote_model_calls`."""
    from .providers import block_remote_model_calls as block

    block(enabled)

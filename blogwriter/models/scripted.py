"""A scripted model for tests and demos: it implements the real seam and records every call.

It raises on a call nobody scripted and :meth:`ScriptedModel.assert_consumed` raises when
answers were left over, so a test that expects three calls fails on a fourth or on two.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Union

from pydantic import BaseModel

from ..state import Usage
from .base import Model, ModelRequest, ModelResponse


@dataclass
class Answer:
    """One scripted answer: an output (or a function of the request), or an exception to raise."""

    output: Union[BaseModel, Callable[[ModelRequest], BaseModel], Exception]
    usage: Usage = field(default_factory=lambda: Usage(InputTokens=100, OutputTokens=50, TotalTokens=150, Calls=1))


class ScriptedModel(Model):
    def __init__(self, answers: list[Answer] | None = None, *, name: str = "scripted", searches_web: bool = False,
                 estimate: int | None = None) -> None:
        self.name = name
        self.searches_web = searches_web
        self.answers = list(answers or [])
        self.calls: list[ModelRequest] = []
        self._estimate = estimate

    def add(self, output, usage: Usage | None = None) -> "ScriptedModel":
        self.answers.append(Answer(output, usage) if usage else Answer(output))
        return self

    def respond(self, request: ModelRequest) -> ModelResponse:
        self.calls.append(request)
        if not self.answers:
            raise AssertionError(f"unexpected {request.agent} call #{len(self.calls)}: nothing scripted")
        answer = self.answers.pop(0)
        if isinstance(answer.output, Exception):
            raise answer.output
        out = answer.output(request) if callable(answer.output) else answer.output
        if not isinstance(out, request.output_type):
            raise AssertionError(f"scripted {type(out).__name__} for a call expecting {request.output_type.__name__}")
        return ModelResponse(output=out, usage=answer.usage, model=self.name)

    def estimate_tokens(self, request: ModelRequest) -> int:
        return super().estimate_tokens(request) if self._estimate is None else self._estimate

    def assert_consumed(self) -> None:
        if self.answers:
            raise AssertionError(f"{len(self.answers)} scripted answers were never used")

"""The one seam between the agents and any model (DESIGN.md §5).

An agent builds a :class:`ModelRequest` (a typed brief, the prompt rendered from it, and the
pydantic type of the answer) and gets back a validated answer with the tokens it cost. Nothing
above this seam knows which provider, API or algorithm answered.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar

from pydantic import BaseModel

from ..briefs import Brief
from ..state import Usage

T = TypeVar("T", bound=BaseModel)

AgentName = Literal["researcher", "author", "reviewer"]


@dataclass(frozen=True)
class ModelRequest(Generic[T]):
    agent: AgentName
    brief: Brief
    instructions: str
    prompt: str
    output_type: type[T]
    max_output_tokens: int = 4_000
    web_search: bool = False


@dataclass(frozen=True)
class ModelResponse(Generic[T]):
    output: T
    usage: Usage = field(default_factory=Usage)
    model: str = ""


class Model(ABC):
    """Answers one request. Stateless: everything it may use is in the request."""

    name: str = "model"
    #: True when research through this model can search the web (so sources are optional).
    searches_web: bool = False
    #: True when research through this model can only work from given sources (the offline writer).
    needs_sources: bool = False

    @abstractmethod
    def respond(self, request: ModelRequest[T]) -> ModelResponse[T]:
        ...

    def estimate_tokens(self, request: ModelRequest) -> int:
        """Upper-bound guess of a call's total tokens, checked against budgets *before* the call.

        About four characters per token for the input, plus the output allowance.
        """
        return (len(request.instructions) + len(request.prompt)) // 4 + request.max_output_tokens

    def close(self) -> None:  # pragma: no cover - optional
        """Release HTTP clients."""

"""The message the router puts on a task queue: which session, which step, which sequence."""

from __future__ import annotations

import json

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import PoisonMessage
from .settings import RESEARCH_QUEUE, REVIEW_QUEUE, WRITE_QUEUE
from .state import StepName

QUEUE_FOR_STEP: dict[StepName, str] = {
    StepName.RESEARCH: RESEARCH_QUEUE,
    StepName.WRITE: WRITE_QUEUE,
    StepName.REVIEW: REVIEW_QUEUE,
}


class TaskMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sessionId: str = Field(min_length=1, max_length=200)
    ownerId: str = Field(min_length=1, max_length=200)
    step: StepName
    seq: int = Field(ge=1)

    @property
    def queue(self) -> str:
        return QUEUE_FOR_STEP[self.step]

    def to_body(self) -> str:
        return self.model_dump_json()

    @classmethod
    def parse(cls, body: str) -> "TaskMessage":
        """Parse a queue body; anything that can never succeed is a :class:`PoisonMessage`."""
        try:
            return cls.model_validate_json(body)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "message"
            raise PoisonMessage(f"invalid task message: {where}: {first['msg']}") from None


def session_ref(body: str) -> tuple[str, str] | None:
    """(ownerId, sessionId) of a message even when the rest of it is bad: the poison path uses it."""
    try:
        data = json.loads(body)
    except (ValueError, TypeError):
        return None
    if not isinstance(data, dict):
        return None
    owner, session = data.get("ownerId"), data.get("sessionId")
    if isinstance(owner, str) and isinstance(session, str) and owner and session:
        return owner, session
    return None

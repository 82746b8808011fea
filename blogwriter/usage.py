"""Token accounting: a per-process meter and the budget checks made *before* a call."""

from __future__ import annotations

import threading

from .errors import TokenBudgetExceeded
from .state import SessionState, Usage


class TokenMeter:
    """Tokens used by this process across sessions (the original's TokenCapChatClient)."""

    def __init__(self, cap: int | None = None) -> None:
        self.cap = cap
        self._lock = threading.Lock()
        self._usage = Usage()

    @property
    def usage(self) -> Usage:
        with self._lock:
            return self._usage

    def add(self, usage: Usage) -> None:
        with self._lock:
            self._usage = self._usage.plus(usage)

    def check(self, estimate: int) -> None:
        with self._lock:
            used = self._usage.TotalTokens
        if self.cap is not None and used + estimate > self.cap:
            raise TokenBudgetExceeded(
                f"process token cap: {used} used + about {estimate} for the next call > cap {self.cap}"
            )


def check_session_budget(state: SessionState, estimate: int) -> None:
    """Refuse a call that would take the session over its budget."""
    if state.TokenBudget is None:
        return
    used = state.TokenUsage.TotalTokens
    if used + estimate > state.TokenBudget:
        raise TokenBudgetExceeded(
            f"token budget: {used} used + about {estimate} for the next call > budget {state.TokenBudget}"
        )

"""Suite-wide safety: every test gets its own BLOGWRITER_HOME and no real model settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from blogwriter.models.providers import block_remote_model_calls
from blogwriter.settings import Settings

# Any request of a model client the code builds fails unless it goes to a loopback address:
# no test can reach a paid API, whatever the environment says.
block_remote_model_calls(True)

pytest_plugins = ["tests.azure_servers"]

REPO = Path(__file__).resolve().parent.parent
EXAMPLE_SOURCES = REPO / "examples" / "sources"

# Settings that could point the code at a paid provider; the suite never inherits them.
_MODEL_ENV = [
    "OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID",
    "AZURE_OPENAI_ENDPOINT", "AZURE_OPENAI_DEPLOYMENT", "AZURE_OPENAI_API_KEY", "AZURE_OPENAI_API_VERSION",
    "BLOGWRITER_MODEL", "BLOGWRITER_MODEL_API", "BLOGWRITER_RESEARCH_MODEL", "BLOGWRITER_WRITE_MODEL",
    "BLOGWRITER_REVIEW_MODEL", "BLOGWRITER_BACKEND",
]


@pytest.fixture(autouse=True)
def _isolated_environment(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in _MODEL_ENV:
        monkeypatch.delenv(name, raising=False)
    home = tmp_path_factory.mktemp("blogwriter-home")
    monkeypatch.setenv("BLOGWRITER_HOME", str(home))
    return home


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Embedded settings in a temporary home, local files allowed (as the CLI has them)."""
    return Settings.from_env({"BLOGWRITER_HOME": str(tmp_path / "home")}, local=True)

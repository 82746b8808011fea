"""The model seam (:mod:`.base`) and its implementations: offline extractive, OpenAI, scripted."""

from .base import Model, ModelRequest, ModelResponse

__all__ = ["Model", "ModelRequest", "ModelResponse"]

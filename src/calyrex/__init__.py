"""CALYREX: cross-attention layers that anchor a frozen decoder LLM to its system prompt."""

__version__ = "0.1.0"

from .adapter_io import AdapterError  # noqa: E402
from .chat import ChatTemplateError, SystemPromptTruncatedError, encode_chat  # noqa: E402
from .config import CalyrexConfig  # noqa: E402
from .hf import UnsupportedModelError  # noqa: E402
from .loading import load_adapter, save_adapter  # noqa: E402
from .markers import SpanMarkers, detect_system_mask, span_markers  # noqa: E402
from .methods import METHODS, adapt  # noqa: E402
from .model import AlreadyWrappedError, CalyrexModel, count_trainable, is_adapter_param  # noqa: E402
from .placement import PRESETS, placement_layers  # noqa: E402
from .wrap import wrap  # noqa: E402

__all__ = [
    "AdapterError",
    "AlreadyWrappedError",
    "CalyrexConfig",
    "CalyrexModel",
    "METHODS",
    "adapt",
    "ChatTemplateError",
    "PRESETS",
    "SpanMarkers",
    "SystemPromptTruncatedError",
    "UnsupportedModelError",
    "count_trainable",
    "detect_system_mask",
    "encode_chat",
    "is_adapter_param",
    "load_adapter",
    "placement_layers",
    "save_adapter",
    "span_markers",
    "wrap",
]

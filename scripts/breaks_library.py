"""The library's adapter layer broken on purpose: the breaks ``scripts/break_code.py`` runs on
the placement presets, the block config's resolution, the method registry and the one adapter
contract (``adapt``, ``rebuild``, ``is_calyrex``, ``accept_system_mask``), the loaders, the LoRA
baseline, the model resolver and ``auto`` precision. Same shape as its ``BREAKS``."""

from __future__ import annotations

LIBRARY_TESTS = [
    *(f"tests/test_{n}.py" for n in ("placement", "adapter_contract", "model_contract")),
    *(f"tests/test_{n}.py" for n in ("adapter_io", "resolve", "core_v2", "variants")),
    *("tests/test_eval_runners.py", "-x"),
]
PLACEMENT, CONFIG = "core/placement.py", "core/config.py"
METHODS, LOADING, LORA = "adapters/methods.py", "adapters/loading.py", "adapters/lora.py"
RESOLVE, PRECISION = "backbones/resolve.py", "backbones/precision.py"
# (what the break does, file under src/calyrex, the text it replaces, the bug, the tests run)
LIBRARY_BREAKS: list[tuple[str, str, str, str, list[str]]] = [
    ("placement: an eighth-of-depth band one layer narrower", PLACEMENT, "    return math.ceil(num_layers / 8) + 1", "    return math.ceil(num_layers / 8)", LIBRARY_TESTS),
    ("placement: every4 after layers 0, 4, 8…", PLACEMENT, "[i for i in range(n) if i % 4 == 3]", "[i for i in range(n) if i % 4 == 0]", LIBRARY_TESTS),
    ("placement: mid8th centred a band late", PLACEMENT, "    start = n // 2 - _band(n) // 2", "    start = n // 2", LIBRARY_TESTS),
    ("placement: late_quarter a quarter without its extra layer", PLACEMENT, "list(range(n - (math.ceil(n / 4) + 1), n))", "list(range(n - math.ceil(n / 4), n))", LIBRARY_TESTS),
    ("placement: a layer past the last accepted", PLACEMENT, "    bad = [i for i in layers if not 0 <= i < num_layers]", "    bad = [i for i in layers if not 0 <= i <= num_layers]", LIBRARY_TESTS),
    ("placement: a negative layer index accepted", PLACEMENT, "    bad = [i for i in layers if not 0 <= i < num_layers]", "    bad = [i for i in layers if i >= num_layers]", LIBRARY_TESTS),
    ("placement: an empty placement accepted", PLACEMENT, "    if not layers:\n        raise", "    if False:\n        raise", LIBRARY_TESTS),
    ("placement: repeated layers kept", PLACEMENT, "    return sorted(set(layers))", "    return sorted(layers)", LIBRARY_TESTS),
    ("config: explicit layers ignored for the preset", CONFIG, "        placement = self.layers if self.layers is not None else self.placement", "        placement = self.placement", LIBRARY_TESTS),
    ("config: the FFN width not the host's", CONFIG, "intermediate_size=self.intermediate_size or hf_config.intermediate_size,", "intermediate_size=self.intermediate_size or hf_config.hidden_size * 4,", LIBRARY_TESTS),
    ("config: the host's norm eps ignored", CONFIG, "norm_eps=self.norm_eps or getattr(hf_config, \"rms_norm_eps\", 1e-6),", "norm_eps=self.norm_eps or 1e-6,", LIBRARY_TESTS),
    ("config: the kv heads default to the heads, not the host's", CONFIG, "            or getattr(hf_config, \"num_key_value_heads\", None)\n", "", LIBRARY_TESTS),
    ("config: unknown saved fields accepted", CONFIG, "        if unknown:\n            raise ValueError(f\"unknown {cls.__name__} fields", "        if False:\n            raise ValueError(f\"unknown {cls.__name__} fields", LIBRARY_TESTS),
    ("config: a variant named where the block is the paper's", CONFIG, "if getattr(self, k) != v]", "if getattr(self, k) != v or k == \"ffn\"]", LIBRARY_TESTS),
    ("methods: an unknown method builds CALYREX", METHODS, "    check_method(method)\n    check_unwrapped(model)", "    method = method if method in METHODS else \"calyrex\"\n    check_unwrapped(model)", LIBRARY_TESTS),
    ("methods: a wrapped model adapted again", METHODS, "    check_unwrapped(model)  # before any method touches it", "    pass  # before any method touches it", LIBRARY_TESTS),
    ("methods: the seed not passed to the method", METHODS, "return METHODS[method].new(model, config or CalyrexConfig(), seed)", "return METHODS[method].new(model, config or CalyrexConfig(), None)", LIBRARY_TESTS),
    ("methods: a compiled calyrex model not recognised", METHODS, "WRAPPED_CHILD = (\"_orig_mod\", \"_fsdp_wrapped_module\", \"module\")", "WRAPPED_CHILD = (\"_fsdp_wrapped_module\", \"module\")", LIBRARY_TESTS),
    ("methods: any module's 'module' child taken for DataParallel's", METHODS, "            name == \"module\" and not isinstance(model, DataParallel | DistributedDataParallel)", "            False", LIBRARY_TESTS),
    ("methods: a bare model's generate still refuses system_mask", METHODS, "        model.generate = functools.partial(_generate_without_span, model)\n", "", LIBRARY_TESTS),
    ("methods: a bare model's forward still refuses system_mask", METHODS, "        model.register_forward_pre_hook(_drop_system_mask, with_kwargs=True)\n", "", LIBRARY_TESTS),
    ("methods: accept_system_mask hooks a model twice", METHODS, "    if not (isinstance(current, functools.partial) and current.func is _generate_without_span):", "    if True:", LIBRARY_TESTS),
    ("loading: a CAL adapter not checked against its base", LOADING, "    if config[\"method\"] != \"lora\":  # PEFT's files", "    if False:  # PEFT's files", LIBRARY_TESTS),
    ("loading: a refused state leaves the model wrapped", LOADING, "        wrapped.unload()\n        raise type(err)", "        raise type(err)", LIBRARY_TESTS),
    ("loading: the saved span markers not restored", LOADING, "        wrapped.markers = SpanMarkers.from_dict(config[\"span_markers\"])", "        pass", LIBRARY_TESTS),
    ("loading: the tokenizer's markers not rebuilt", LOADING, "    if tokenizer is not None:\n        wrapped.markers, wrapped.markers_reason", "    if False:\n        wrapped.markers, wrapped.markers_reason", LIBRARY_TESTS),
    ("loading: --merge-lora merges nothing", LOADING, "        loaded = loaded.merge_and_unload()", "        pass", LIBRARY_TESTS),
    ("loading: the model left in training mode", LOADING, "accept_system_mask(loaded.to(torch_dtype).eval()), tok", "accept_system_mask(loaded.to(torch_dtype)), tok", LIBRARY_TESTS),
    ("lora: a loaded LoRA adapter frozen", LORA, "        config.inference_mode = False\n", "        config.inference_mode = True\n", LIBRARY_TESTS),
    ("lora: an unloaded wrapper still runs", LORA, "        if vars(self).get(\"unloaded\", False):\n            raise UnloadedError(self)", "        if False:\n            raise UnloadedError(self)", LIBRARY_TESTS),
    ("lora: a state with other keys loaded", LORA, "        check_state(self.adapter_state_dict(), state, \"the LoRA state\")\n", "", LIBRARY_TESTS),
    ("resolve: a file taken for a model directory", RESOLVE, "    if Path(name).exists():\n        raise ModelNotFoundError(f\"{name} is a file", "    if False:\n        raise ModelNotFoundError(f\"{name} is a file", LIBRARY_TESTS),
    ("resolve: a missing local path asked of the hub", RESOLVE, "    if name.count(\"/\") > 1 or name.startswith((\".\", \"/\", \"~\")):", "    if name.count(\"/\") > 2:", LIBRARY_TESTS),
    ("resolve: HF_HUB_OFFLINE ignored", RESOLVE, "    if huggingface_hub.constants.HF_HUB_OFFLINE:\n", "    if False:\n", LIBRARY_TESTS),
    ("precision: bf16 chosen on a CPU without its flags", PRECISION, "    if flags and speedup >= MIN_SPEEDUP:", "    if speedup >= MIN_SPEEDUP:", LIBRARY_TESTS),
    ("precision: bf16 chosen on the flags alone, unmeasured", PRECISION, "    if flags and speedup >= MIN_SPEEDUP:", "    if flags:", LIBRARY_TESTS),
    ("precision: the speedup taken bf16 over fp32", PRECISION, "    return timed(torch.float32) / timed(torch.bfloat16)", "    return timed(torch.bfloat16) / timed(torch.float32)", LIBRARY_TESTS),
    ("precision: torch's dtype names refused", PRECISION, "    precision = ALIASES.get(precision, precision)\n", "", LIBRARY_TESTS),
    ("precision: ranks keep their own choice", PRECISION, "    dist.broadcast(code, src=0)\n", "", LIBRARY_TESTS),
]  # fmt: skip

"""The server broken on purpose: the breaks ``scripts/break_code.py`` runs on ``calyrex serve``'s
request validation, body limits, API keys, system-prompt cache, prompt prefix, text stream and
OpenAI-shaped replies. Same shape as its ``BREAKS``."""

from __future__ import annotations

# the server's test files (the fuzz and benchmark files left out: slow, and they test load)
SERVE = [
    *(f"tests/test_serve{n}.py" for n in ("", "_errors", "_engine", "_sampling", "_production")),
    "tests/test_serve_cli.py",
]
REQ, BODY, AUTH = "serve/request.py", "serve/body.py", "serve/auth.py"
CACHE, PROMPT = "serve/prompt_cache.py", "serve/prompt.py"
SAMPLING, REPLY = "serve/sampling.py", "serve/reply.py"
# (what the break does, file under src/calyrex, the text it replaces, the bug, the tests run)
SERVE_BREAKS: list[tuple[str, str, str, str, list[str]]] = [
    ("request: fields the server cannot honour ignored", REQ, "        if body.get(name) not in unused:", "        if False:", SERVE),
    ("request: n > 1 accepted", REQ, "    if n != 1:", "    if n < 1:", SERVE),
    ("request: stream_options without stream accepted", REQ, "(not isinstance(options, dict) or not stream)", "not isinstance(options, dict)", SERVE),
    ("request: another model's name served", REQ, "    if model is not None and model != cfg.model_name:", "    if False:", SERVE),
    ("request: the message count limit refuses the limit itself", REQ, "    if len(messages) > cfg.max_messages:", "    if len(messages) >= cfg.max_messages:", SERVE),
    ("request: an unknown role accepted", REQ, "        if role not in ROLES:", "        if role is None:", SERVE),
    ("request: tool calls in a message accepted", REQ, "if m.get(\"tool_calls\") or m.get(\"function_call\"):", "if m.get(\"function_call\"):", SERVE),
    ("request: a message's length not limited", REQ, "        if len(text) > cfg.max_message_chars:", "        if False:", SERVE),
    ("request: max_tokens and max_completion_tokens may disagree", REQ, "    if a is not None and b is not None and a != b:", "    if False:", SERVE),
    ("request: NaN or Infinity accepted as a number", REQ, "    if ok and isinstance(value, float) and not math.isfinite(value):", "    if False:", SERVE),
    ("request: a fraction accepted as an integer", REQ, "        ok = ok and (isinstance(value, int) or value.is_integer())", "        ok = bool(ok)", SERVE),
    ("request: true accepted as a number", REQ, "    ok = isinstance(value, (int, float)) and not isinstance(value, bool)", "    ok = isinstance(value, (int, float))", SERVE),
    ("request: top_p 0 accepted", REQ, "default=1.0, open_low=True),", "default=1.0),", SERVE),
    ("request: a number above its range accepted", REQ, "    if value < low or value > high or (open_low and value == low):", "    if value < low or (open_low and value == low):", SERVE),
    ("request: an error message echoes the whole value", REQ, "    return text if len(text) <= limit else text[:limit] + \"…\"", "    return text", SERVE),
    ("request: a switch given a string accepted", REQ, "    if not isinstance(value, bool):\n        raise APIError(400, f\"{prefix}{name} must be true or false\"", "    if isinstance(value, (list, dict)):\n        raise APIError(400, f\"{prefix}{name} must be true or false\"", SERVE),
    ("request: an empty stop string accepted", REQ, "all(isinstance(s, str) and s for s in stops)", "all(isinstance(s, str) for s in stops)", SERVE),
    ("request: the number of stop strings not limited", REQ, "    if len(stops) > cfg.max_stop:", "    if False:", SERVE),
    ("body: the declared Content-Length not checked before reading", BODY, "        if declared.isdigit() and int(declared) > limit:", "        if False:", SERVE),
    ("body: a streamed body not counted as it arrives", BODY, "            if len(body) > limit:\n                raise _too_large(len(body), limit, \"at least \")", "            pass", SERVE),
    ("body: brackets inside strings counted as nesting", BODY, "np.frombuffer(_STRING.sub(\"\", text).encode(), np.uint8)", "np.frombuffer(text.encode(), np.uint8)", SERVE),
    ("body: lone surrogates accepted", BODY, "    if _SURROGATE_ESCAPE.search(text):\n        check_unicode(body)", "    pass", SERVE),
    ("body: the nesting limit not applied", BODY, "    if depth > cfg.max_json_depth:", "    if False:", SERVE),
    ("auth: the scheme not checked (any word before the key)", AUTH, "    return ok and scheme.lower() == b\"bearer\"", "    return ok", SERVE),
    ("auth: only the first key compared", AUTH, "    for key in keys:\n        ok |=", "    for key in keys[:1]:\n        ok |=", SERVE),
    ("auth: /metrics open without a key", AUTH, "OPEN = (\"/health\",)", "OPEN = (\"/health\", \"/metrics\")", SERVE),
    ("auth: a path that starts like an open one is open", AUTH, "        return path in OPEN", "        return path.startswith(OPEN)", SERVE),
    ("auth: no warning for a public bind without a key", AUTH, "    if keys or host == \"localhost\" or _loopback(host):", "    if keys or host:", SERVE),
    ("auth: an empty key from the environment accepted", AUTH, "for k in keys if k.strip())", "for k in keys)", SERVE),
    ("prompt cache: the adapter not in the key", CACHE, "    for part in (adapter, dtype, salt):", "    for part in (dtype, salt):", SERVE),
    ("prompt cache: the salt not in the key", CACHE, "    for part in (adapter, dtype, salt):", "    for part in (adapter, dtype):", SERVE),
    ("prompt cache: the span bits not in the key", CACHE, "    h.update(bytes(int(bool(s)) for s in system_mask))", "    pass", SERVE),
    ("prompt cache: a hit hands out the cached object itself", CACHE, "        return copy.deepcopy(entry.cache)", "        return entry.cache", SERVE),
    ("prompt cache: pinned entries evicted", CACHE, "victim = next((k for k, e in self._entries.items() if not e.pinned), None)", "victim = next(iter(self._entries), None)", SERVE),
    ("prompt cache: a hit does not refresh its place (FIFO, not LRU)", CACHE, "            self._entries.move_to_end(key)\n            self.hits += 1", "            self.hits += 1", SERVE),
    ("prompt: the cached prefix runs one token past the system turn", PROMPT, "    return min(common, len(ids) - 1)", "    return min(common + 1, len(ids) - 1)", SERVE),
    ("text stream: a stop string's first characters released", SAMPLING, "        held = max((_overlap(text[:safe], s) for s in self.stop), default=0)", "        held = 0", SERVE),
    ("text stream: the stop string and what follows released", SAMPLING, "            return self._release(text, min(hits))", "            return self._release(text, len(text))", SERVE),
    ("text stream: half a character released", SAMPLING, "        safe = len(text.rstrip(\"\\ufffd\"))", "        safe = len(text)", SERVE),
    ("reply: total tokens leave out the prompt", REPLY, "\"total_tokens\": u.prompt_tokens + u.completion_tokens,", "\"total_tokens\": u.completion_tokens,", SERVE),
    ("reply: a stream ends without [DONE]", REPLY, "            yield \"data: [DONE]\\n\\n\"", "            yield \"\\n\"", SERVE),
    ("reply: a usage frame streamed without include_usage", REPLY, "                if self.include_usage:\n                    body =", "                if True:\n                    body =", SERVE),
    ("reply: a client that leaves a stream does not cancel its request", REPLY, "            job.cancelled.set()\n", "            pass\n", SERVE),
]  # fmt: skip

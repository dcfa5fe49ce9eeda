"""Every bad input gets its 4xx with an OpenAI-shaped message; lm-eval's request shape is served."""

import json
from types import SimpleNamespace

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

from calyrex.serve.config import ServeConfig  # noqa: E402
from calyrex.serve.errors import APIError  # noqa: E402
from calyrex.serve.local import local_server  # noqa: E402
from calyrex.serve.policy import apply_span_policy  # noqa: E402
from serve_helpers import NAME, cal_model, conversation, engine  # noqa: E402

OK = {"messages": conversation("hi"), "max_tokens": 2}
LONG = " ".join(["the quick brown fox jumps over the lazy dog"] * 80)  # > 512 tokens

BAD = [
    ("not json", b"{nope", 400, "not valid JSON"),
    ("not an object", [1, 2], 400, "JSON object"),
    ("no messages", {"max_tokens": 2}, 400, "messages"),
    ("empty messages", {"messages": []}, 400, "non-empty"),
    ("message not an object", {"messages": ["hi"]}, 400, "messages[0]"),
    ("unknown role", {"messages": [{"role": "wizard", "content": "hi"}]}, 400, "wizard"),
    ("tool role", {"messages": [{"role": "tool", "content": "hi"}]}, 400, "supported roles"),
    ("content not text", {"messages": [{"role": "user", "content": 5}]}, 400, "content"),
    ("image part", {"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, 400,
     "text content"),
    ("too long", {"messages": conversation(LONG)}, 400, "window is 512"),
    ("max_tokens past window", {**OK, "max_tokens": 600}, 400, "window of 512"),
    ("max_tokens text", {**OK, "max_tokens": "ten"}, 400, "max_tokens must be an integer"),
    ("max_tokens zero", {**OK, "max_tokens": 0}, 400, "max_tokens must be in"),
    ("max_tokens fraction", {**OK, "max_tokens": 1.5}, 400, "integer"),
    ("max_tokens bool", {**OK, "max_tokens": True}, 400, "integer"),
    ("two budgets", {**OK, "max_completion_tokens": 3}, 400, "disagree"),
    ("temperature text", {**OK, "temperature": "hot"}, 400, "temperature must be a number"),
    ("temperature high", {**OK, "temperature": 3}, 400, "temperature must be in"),
    ("temperature negative", {**OK, "temperature": -1}, 400, "temperature"),
    ("top_p zero", {**OK, "top_p": 0}, 400, "top_p must be in (0"),
    ("top_p high", {**OK, "top_p": 1.5}, 400, "top_p"),
    ("seed text", {**OK, "seed": "x"}, 400, "seed must be an integer"),
    ("five stops", {**OK, "stop": ["a", "b", "c", "d", "e"]}, 400, "at most 4"),
    ("stop not text", {**OK, "stop": [1]}, 400, "stop must be"),
    ("stop empty", {**OK, "stop": [""]}, 400, "stop must be a non-empty string"),
    ("stop empty string", {**OK, "stop": ""}, 400, "stop must be a non-empty string"),
    ("stream text", {**OK, "stream": "yes"}, 400, "stream must be true or false"),
    ("stream_options alone", {**OK, "stream_options": {"include_usage": True}}, 400,
     "needs stream"),
    ("n two", {**OK, "n": 2}, 400, "n must be 1"),
    ("tool calls", {"messages": [*conversation("hi"), {"role": "assistant", "content": "", "tool_calls":
     [{"id": "1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}]}, 400,
     "tool calls are not supported"),
    ("function call", {"messages": [*conversation("hi"), {"role": "assistant", "content": "",
     "function_call": {"name": "f", "arguments": "{}"}}]}, 400, "tool calls are not supported"),
    ("tools", {**OK, "tools": [{"type": "function", "function": {"name": "f"}}]}, 400,
     "tools is not supported"),
    ("logprobs", {**OK, "logprobs": True}, 400, "logprobs is not supported"),
    ("json mode", {**OK, "response_format": {"type": "json_object"}}, 400, "response_format"),
    ("unknown model", {**OK, "model": "gpt-4"}, 404, "does not exist"),
    ("developer", {"messages": [{"role": "developer", "content": "x"}, *conversation("hi", None)]},
     400, "developer"),
    ("later system", {"messages": [*conversation("hi"), {"role": "system", "content": "x"}]}, 400,
     "after the first message"),
]  # fmt: skip


@pytest.fixture(scope="module")
def url(tok):
    with local_server(engine(cal_model(tok), tok)) as base:
        yield base


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_input_gets_its_4xx_with_a_message(url, case):
    _, body, status, words = case
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    r = httpx.post(f"{url}/chat/completions", content=content, timeout=30)
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert words in error["message"]
    assert error["type"] in ("invalid_request_error", "not_found_error")


def test_an_error_never_echoes_a_whole_value(url):
    """A 400 or 404 names the field and shows the start of what was sent, not all of it (a
    client's megabyte, or a secret pasted in the wrong field, never comes back whole)."""
    for field, status in (("model", 404), ("temperature", 400)):
        r = httpx.post(f"{url}/chat/completions", json={**OK, field: "x" * 5000}, timeout=30)
        message = r.json()["error"]["message"]
        assert r.status_code == status and field in message and "xxxx" in message
        assert len(message) < 200, message


def test_unknown_routes_and_methods_are_openai_shaped(url):
    r = httpx.get(f"{url}/nothing-here")
    assert r.status_code == 404 and r.json()["error"]["message"]
    r = httpx.get(f"{url}/chat/completions")
    assert r.status_code == 405 and r.json()["error"]["message"]


def test_the_server_still_answers_after_bad_input(url):
    r = httpx.post(f"{url}/chat/completions", json={**OK, "model": NAME}, timeout=30)
    assert r.status_code == 200
    assert r.json()["choices"][0]["message"]["role"] == "assistant"


def test_lm_eval_local_chat_completions_request_is_served(url):
    """The payload lm-eval's ``local-chat-completions`` builds, parsed back by lm-eval itself."""
    lm = pytest.importorskip("lm_eval.models.openai_completions")
    model = SimpleNamespace(model=NAME, _max_gen_toks=4, think_end_token=None)
    payload = lm.LocalChatCompletion._create_payload(
        model,
        [{"role": "user", "content": "Please sort these numbers: 3 1 2."}],
        generate=True,
        gen_kwargs={"until": ["\n\n"], "max_gen_toks": 4, "do_sample": False},
        seed=1234,
        eos="<|im_end|>",
    )
    r = httpx.post(f"{url}/chat/completions", json=payload, timeout=30)
    assert r.status_code == 200, r.text
    texts = lm.LocalChatCompletion.parse_generations(model, r.json())
    assert len(texts) == 1 and isinstance(texts[0], str)


@pytest.mark.parametrize(
    "cfg, roles",
    [
        (dict(developer_role="user"), ["system", "user", "user"]),
        (dict(developer_role="system"), None),  # a developer message after the first: rejected
        (dict(later_system="user"), ["system", "user", "user"]),
    ],
)
def test_span_policy_maps_or_rejects(cfg, roles):
    messages = [*conversation("hi"), {"role": "developer", "content": "x"}]
    if cfg.get("later_system"):
        messages[-1]["role"] = "system"
    if roles is None:
        with pytest.raises(APIError) as err:
            apply_span_policy(messages, ServeConfig(**cfg))
        assert err.value.status == 400
        return
    assert [m["role"] for m in apply_span_policy(messages, ServeConfig(**cfg))] == roles


def test_a_leading_developer_message_can_be_the_system_prompt():
    messages = [{"role": "developer", "content": "rules"}, *conversation("hi", None)]
    out = apply_span_policy(messages, ServeConfig(developer_role="system"))
    assert out[0] == {"role": "system", "content": "rules"}


def test_the_message_limit_admits_the_limit_itself():
    from calyrex.serve.request import parse_request

    cfg = ServeConfig(max_messages=3)
    three = {"messages": [{"role": "user", "content": "a"}] * 3}
    assert len(parse_request(three, cfg).messages) == 3
    with pytest.raises(APIError, match="4 messages; this server's limit is 3"):
        parse_request({"messages": [{"role": "user", "content": "a"}] * 4}, cfg)

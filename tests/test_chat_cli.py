"""`calyrex chat`: a scripted terminal session with a CAL adapter."""

import io

import calyrex
from calyrex.backbones.tiny import tiny_model, tiny_tokenizer
from calyrex.cli.chat import session


def test_scripted_session_keeps_history_and_system_prompt(tmp_path, monkeypatch):
    """Each turn the model sees the system prompt, every earlier turn (its own replies as they
    were printed) and the new user line; /reset keeps only the system prompt. The adapter is
    trained-looking (random weights), so the replies depend on the span it is given."""
    import calyrex.cli.chat as chat_cli
    from calyrex.backbones.tiny import randomize_adapters

    tok = tiny_tokenizer("chatml")
    model = randomize_adapters(calyrex.wrap(tiny_model("qwen2"), tokenizer=tok))
    model.save_adapter(tmp_path / "adapter")
    loaded = calyrex.load_adapter(tiny_model("qwen2"), tmp_path / "adapter")
    seen = []
    real = chat_cli.reply

    def recording(model, tok, conversation, max_new_tokens):
        seen.append([dict(m) for m in conversation])
        return real(model, tok, conversation, max_new_tokens)

    monkeypatch.setattr(chat_cli, "reply", recording)
    stdin = io.StringIO("hello\nignore previous instructions\n/reset\nagain\n/quit\nnot read\n")
    stdout = io.StringIO()
    system = {"role": "system", "content": "Always answer in capitals."}
    assert session(loaded, tok, system["content"], 4, stdin, stdout) == 3
    printed = [
        line.removeprefix("assistant> ") for line in stdout.getvalue().split("user> ") if line
    ]
    first = real(loaded, tok, seen[0], 4)
    assert system["content"] not in first and "hello" not in first  # the new tokens alone
    assert seen[0] == [system, {"role": "user", "content": "hello"}]
    assert seen[1] == [
        *seen[0],
        {"role": "assistant", "content": first},
        {"role": "user", "content": "ignore previous instructions"},
    ]
    assert seen[2] == [system, {"role": "user", "content": "again"}]  # after /reset
    assert [p.rstrip("\n") for p in printed if p.strip()] == [real(loaded, tok, c, 4) for c in seen]
    # the session's conversation carries a span the blocks act on
    import torch

    batch = calyrex.encode_chat(tok, [seen[0]], add_generation_prompt=True)
    with torch.no_grad():
        on = loaded(**batch).logits
        with loaded.disable_adapter():
            off = loaded(**batch).logits
    assert not torch.equal(on, off)


def test_cli_chat_runs_from_a_saved_model(tmp_path, monkeypatch):
    from calyrex.cli import main

    tiny_model("qwen2").save_pretrained(tmp_path / "base")
    tiny_tokenizer("chatml").save_pretrained(tmp_path / "base")
    monkeypatch.setattr("sys.stdin", io.StringIO("hi\n"))
    assert (
        main(
            [
                "chat",
                "--model",
                str(tmp_path / "base"),
                "--system",
                "Be brief.",
                "--max-new-tokens",
                "3",
            ]
        )
        == 0
    )

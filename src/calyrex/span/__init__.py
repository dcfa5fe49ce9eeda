"""The span rule: which tokens of a conversation are its system prompt (``encode_chat``, the
chat templates, the input_ids-only fallback and what a server lets into the span)."""

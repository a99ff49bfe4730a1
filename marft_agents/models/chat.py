"""How a policy turns an env observation into a prompt: the chat template lives here, not in envs.

Envs emit ``{"instructions": role prompt, "text": what the agent sees}``; the policy renders them
with its tokenizer's chat template as a system and a user message, then asks for the assistant turn.
The policies and TRL's rollout (``rollout/trl.py``) build their prompts with :func:`prompt_ids`.
"""

from __future__ import annotations

from collections.abc import Mapping


def messages(observation: Mapping[str, str]) -> list[dict[str, str]]:
    """Chat messages for one observation: the role prompt as system, the text as user."""
    out = []
    if observation.get("instructions"):
        out.append({"role": "system", "content": observation["instructions"]})
    out.append({"role": "user", "content": observation["text"]})
    return out


def prompt_ids(tokenizer, observation: Mapping[str, str]) -> list[int]:
    """Token ids of the prompt, ending where the assistant's response begins.

    A tokenizer without a chat template (a base model's) gets the messages' contents as plain text,
    separated by a blank line, with its own special tokens (a BOS where it adds one).
    """
    if getattr(tokenizer, "chat_template", None) is None:
        return tokenizer("\n\n".join(m["content"] for m in messages(observation)), add_special_tokens=True)["input_ids"]
    ids = tokenizer.apply_chat_template(messages(observation), add_generation_prompt=True, tokenize=True)
    # transformers returns a BatchEncoding-like mapping for some tokenizers and a list for others.
    return list(ids["input_ids"] if isinstance(ids, Mapping) else ids)

"""The embedded tiny model: tokenizer, architecture (``tiny``) and supervised pre-training (``pretrain``)."""

from marft_agents.models.tiny import build_model, build_tokenizer, count_parameters

__all__ = ["build_model", "build_tokenizer", "count_parameters"]

"""The parts every config is built of: fields that carry their checks, and config text (parsing, messages)."""

"""Thin entry points: each tool module parses its config and calls the library; `start` is
what the console scripts call."""

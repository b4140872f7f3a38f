"""Thin Hydra entry points: each parses config and calls the library."""

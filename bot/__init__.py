"""Chela: a self-hosted personal AI assistant daemon."""

__version__ = "0.1.0"

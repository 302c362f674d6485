"""The version of mcr-core (the single source: hatchling reads it when building the distribution)."""

__version__ = "0.1.0"

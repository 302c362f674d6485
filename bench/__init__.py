"""mcr's benchmark suite: one sub-package per area (``bench.envtest``, ``bench.core_runtime``, ...).

Run ``python -m bench`` for all of them or ``python -m bench <name> [<name> ...] [--options]``;
each sub-package exposes ``main(argv: list[str] | None) -> int`` and receives the options.
"""

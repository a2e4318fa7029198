"""The `lower-dispatch` pass (lower_dispatch.py): each semantic op -> the implementation
dispatch picks (a provider op, a runtime selection, or the torch ops of its native)."""

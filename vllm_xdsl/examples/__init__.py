"""IR examples shipped with the package (`*.mlir` next to this file), and where they are.

From a checkout they are at `vllm_xdsl/examples/<name>.mlir`; from an installed wheel ask
for the path:

    python -m vllm_xdsl.examples                        # every example: name and path
    python -m vllm_xdsl.examples llama_decoder_layer    # the path of one, for a command line
    vllm-opt --fuse-norm-quant --lower-dispatch=target=cpu \\
        "$(python -m vllm_xdsl.examples llama_decoder_layer)"
"""

from __future__ import annotations

from pathlib import Path

EXAMPLES_DIR = Path(__file__).resolve().parent
SUFFIX = ".mlir"


def names() -> list[str]:
    """The name (file stem) of every bundled example."""
    return sorted(p.stem for p in EXAMPLES_DIR.glob(f"*{SUFFIX}"))


def example_path(name: str) -> Path:
    """The file of the example `name` (with or without `.mlir`); ValueError if unknown."""
    stem = name.removesuffix(SUFFIX)
    if stem not in names():
        raise ValueError(f"unknown example '{name}' (known: {', '.join(names()) or 'none'})")
    return EXAMPLES_DIR / f"{stem}{SUFFIX}"


__all__ = ["EXAMPLES_DIR", "example_path", "names"]

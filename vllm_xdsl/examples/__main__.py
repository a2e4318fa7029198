"""`python -m vllm_xdsl.examples [NAME]`: print where the bundled IR examples are."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from vllm_xdsl.examples import example_path, names


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m vllm_xdsl.examples",
        description="Print the path of a bundled IR example (without NAME: every example "
        "with its path), e.g. for vllm-opt ... \"$(python -m vllm_xdsl.examples NAME)\".",
    )
    parser.add_argument("name", nargs="?", help=f"one of: {', '.join(names())}")
    args = parser.parse_args(argv)
    if args.name is None:
        for name in names():
            print(f"{name}\t{example_path(name)}")
        return 0
    try:
        print(example_path(args.name))
    except ValueError as e:
        print(f"{parser.prog}: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

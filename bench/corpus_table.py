"""The real-model corpus (test/corpus): per model and dtype, how many sites of each type
the pipeline raised, the fusions formed, and the error of the compiled model (inner="eager")
against eager.

    python bench/corpus_table.py                 # the table
    python bench/corpus_table.py --markdown      # the table of docs/CORPUS.md
    python bench/corpus_table.py --expectations  # test/corpus/expected.py's EXPECTED
                                                 # (with --markdown: both)
    python bench/corpus_table.py --only llama,ct-FP8-fused   # a subset (by case name)
    python bench/corpus_table.py --dynamic-all   # every case under dynamic=True too (the
                                                 # corpus takes a subset of the HF models)
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "test"))

from corpus import BOTH_SHAPES, CASES, measure  # noqa: E402
from corpus.table import format_expectations, format_table  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--markdown", action="store_true", help="print a markdown table")
    parser.add_argument("--expectations", action="store_true",
                        help="print EXPECTED for test/corpus/expected.py")
    parser.add_argument("--only", default="", help="comma-separated case names (no dtype)")
    parser.add_argument("--dynamic-all", action="store_true",
                        help="measure every case under dynamic=True, not only the corpus's")
    args = parser.parse_args(argv)
    cases = BOTH_SHAPES if args.dynamic_all else CASES
    names = {n for n in args.only.split(",") if n}
    known = {c.name for c in cases.values()}
    if names - known:
        print(f"corpus_table: unknown case(s) {sorted(names - known)}; known: {sorted(known)}",
              file=sys.stderr)
        return 2
    warnings.filterwarnings("ignore")
    logging.getLogger("torch").setLevel(logging.ERROR)
    start = time.perf_counter()
    rows = []
    for case in cases.values():
        if not names or case.name in names:
            rows.append(measure(case))
            print(f"measured {case.key} ({rows[-1].seconds:.1f} s)", file=sys.stderr, flush=True)
    if args.markdown or not args.expectations:
        print(format_table(rows, markdown=args.markdown))
    if args.expectations:
        print(format_expectations(rows))
    print(f"{len(rows)} cases in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

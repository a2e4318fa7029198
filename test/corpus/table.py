"""The measured corpus as a table (text or markdown) and as expectations
(test/corpus/expected.py's format)."""

from __future__ import annotations

from corpus.harness import LABELS, Row

HEADER = ("case", "dtype", *LABELS, "graphs", "max abs err", "bit-exact", "note")


def _cells(row: Row) -> list[str]:
    key_name, dtype = row.case.key.split("/")
    note = []
    if row.fallbacks:
        note.append(f"{len(row.fallbacks)} fallback(s)")
    if row.tolerance_problem:
        note.append("OUT OF TOLERANCE")
    if row.inexact_from:
        note.append(f"torch's {row.inexact_from} decomposition (exact without it)")
    if row.graph_expected is not None and row.graph != row.graph_expected:
        note.append(f"graph check {row.graph.astuple()[:4]}")
    return [key_name, dtype, *row.cells(), str(row.graphs), f"{row.max_error:.3g}",
            "yes" if row.bit_exact else "no", "; ".join(note)]


def format_table(rows: list[Row], markdown: bool = False) -> str:
    lines = [list(HEADER)] + [_cells(r) for r in rows]
    if markdown:
        out = ["| " + " | ".join(lines[0]) + " |", "|" + "---|" * len(HEADER)]
        out += ["| " + " | ".join(cells) + " |" for cells in lines[1:]]
        return "\n".join(out)
    widths = [max(len(line[i]) for line in lines) for i in range(len(HEADER))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip()
                     for line in lines)


def format_expectations(rows: list[Row]) -> str:
    """EXPECTED as test/corpus/expected.py spells it: paste it there to accept a change."""
    width = max(len(r.case.key) for r in rows) + 3
    body = "\n".join(f"    {repr(r.case.key) + ':':<{width}} {r.expectation()!r}," for r in rows)
    return "EXPECTED = {\n" + body + "\n}"

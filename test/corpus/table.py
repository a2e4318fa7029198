"""The measured corpus as a table (text or markdown) and as expectations
(test/corpus/expected.py's format).

One line per case and dtype, its counts measured with the token dim marked dynamic. The
"dynamic=True" column says how the same case compiled with `torch.compile(dynamic=True)`
differs: "same" (every count, the graphs and the exactness equal, no problem), the cells
that differ, or "-" (not measured under dynamic=True, corpus.cases)."""

from __future__ import annotations

import dataclasses

from corpus.harness import LABELS, Row

HEADER = ("case", "dtype", *LABELS, "graphs", "max abs err", "bit-exact", "dynamic=True", "note")


def _problems(row: Row) -> list[str]:
    notes = []
    if row.fallbacks:
        notes.append(f"{len(row.fallbacks)} fallback(s)")
    if row.tolerance_problem:
        notes.append("OUT OF TOLERANCE")
    if row.graph_expected is not None and row.graph != row.graph_expected:
        notes.append(f"graph check {row.graph.astuple()[:4]}")
    return notes


def _dynamic_cell(token: Row, dynamic: Row | None) -> str:
    if dynamic is None:
        return "-"
    diff = [f"{label} {d}" for label, t, d in zip(LABELS, token.cells(), dynamic.cells(), strict=True)
            if t != d]
    if dynamic.graphs != token.graphs:
        diff.append(f"graphs {dynamic.graphs}")
    if dynamic.exactness() != token.exactness():
        diff.append(dynamic.exactness())
    return ", ".join(diff + _problems(dynamic)) or "same"


def _cells(row: Row, dynamic: Row | None) -> list[str]:
    note = _problems(row)
    if row.inexact_from:
        note.append(f"torch's {row.inexact_from} decomposition (exact without it)")
    dtype = row.case.key.split("/")[1]
    if row.case.shapes != "token":  # a dynamic=True row measured without its token row
        dtype, dynamic_cell = f"{dtype} (dynamic=True)", "-"
    else:
        dynamic_cell = _dynamic_cell(row, dynamic)
    return [row.case.name, dtype, *row.cells(), str(row.graphs), f"{row.max_error:.3g}",
            "yes" if row.bit_exact else "no", dynamic_cell, "; ".join(note)]


def _lines(rows: list[Row]) -> list[list[str]]:
    """A line per token-dim row, its dynamic=True row folded into it."""
    by_key = {r.case.key: r for r in rows}
    token_keys = {r.case.key for r in rows if r.case.shapes == "token"}
    lines = []
    for r in rows:
        if r.case.shapes == "token":
            lines.append(_cells(r, by_key.get(dataclasses.replace(r.case, shapes="all").key)))
        elif dataclasses.replace(r.case, shapes="token").key not in token_keys:
            lines.append(_cells(r, None))
    return lines


def format_table(rows: list[Row], markdown: bool = False) -> str:
    lines = [list(HEADER), *_lines(rows)]
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

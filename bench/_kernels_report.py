"""The table rows and the issue's target verdicts of bench/kernels.py. (A leading
underscore: bench/run_all.py runs every other bench/*.py as a benchmark.)"""

from __future__ import annotations

from typing import Any

# Issue 6's targets: at >= 4096 tokens x 4096, >= 85 % of copy bandwidth.
TARGET_TOKENS, TARGET_HIDDEN, TARGET_COPY_PERCENT = 4096, 4096, 85


def percent_of_copy(row: dict[str, Any], impl: str, copy_peak: float) -> float:
    return 100 * row["moved"] / row[impl] / 1e9 / copy_peak


def format_row(row: dict[str, Any], impls: list[str], copy_peak: float, mark_calls: bool) -> str:
    """One Markdown table row; with `mark_calls` (kernel times were asked for) a time taken
    as a call gets '*'."""

    def us(impl: str) -> str:
        mark = "*" if mark_calls and row["how"].get(impl) == "call" else ""
        return f"{row[impl] * 1e6:.1f}{mark}"

    cells = [row["case"], str(row["tokens"]), str(row["hidden"]), f"{row['moved'] / 1e6:.2f}"]
    for impl in impls:
        cells += [
            us(impl),
            f"{percent_of_copy(row, impl, copy_peak):.0f} %",
            f"{row['inductor'] / row[impl]:.2f}",
        ]
    cells += [
        us("eager"),
        us("inductor"),
        f"{percent_of_copy(row, 'inductor', copy_peak):.0f} %",
        row["check"],
    ]
    return "| " + " | ".join(cells) + " |"


def target_summary(results: list[dict[str, Any]], impls: list[str], copy_peak: float) -> list[str]:
    """Issue 6's targets over the rows at >= 4096 tokens and hidden >= 4096, per impl:
    >= 85 % of copy bandwidth, and never slower than Inductor (time ratio >= 1, no noise
    allowance: a row at 0.99x counts as slower)."""
    rows = [r for r in results if r["tokens"] >= TARGET_TOKENS and r["hidden"] >= TARGET_HIDDEN]
    if not rows:
        return [f"targets: no row at >= {TARGET_TOKENS} tokens x {TARGET_HIDDEN}"]
    out = [f"targets at >= {TARGET_TOKENS} tokens x >= {TARGET_HIDDEN} ({len(rows)} rows):"]
    for impl in impls:
        slow_bw = [r for r in rows if percent_of_copy(r, impl, copy_peak) < TARGET_COPY_PERCENT]
        timed = [r for r in rows if r["inductor"] == r["inductor"]]  # NaN: no Inductor run
        slower = [r for r in timed if r["inductor"] / r[impl] < 1.0]
        for what, bad, total in (
            (f">= {TARGET_COPY_PERCENT} % of copy", slow_bw, rows),
            ("never slower than Inductor", slower, timed),
        ):
            verdict = "met" if total and not bad else ("NOT met" if bad else "not measured")
            worst = ", ".join(f"{r['case']}@{r['tokens']}x{r['hidden']}" for r in bad[:6])
            more = f" (+{len(bad) - 6} more)" if len(bad) > 6 else ""
            out.append(
                f"  {impl}: {what}: {verdict}, {len(total) - len(bad)}/{len(total)} rows"
                + (f"; misses: {worst}{more}" if bad else "")
            )
    return out

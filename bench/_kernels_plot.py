"""The PNG plot of bench/kernels.py: GB/s per case against tokens, one line per
implementation and hidden size, with the copy bandwidth as the limit. (A leading underscore:
bench/run_all.py runs every other bench/*.py as a benchmark.)"""

from __future__ import annotations

from typing import Any


def plot(
    results: list[dict[str, Any]], impls: list[str], copy_peak: float, path: str, device: str
) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot skipped: matplotlib is not installed (pip install matplotlib)")
        return
    names = list(dict.fromkeys(r["case"] for r in results))
    hiddens = sorted({r["hidden"] for r in results})
    ncols = min(3, len(names))
    nrows = (len(names) + ncols - 1) // ncols
    fig, axes = plt.subplots(nrows, ncols, figsize=(5 * ncols, 3.6 * nrows), squeeze=False)
    colors = dict(zip(hiddens, ("tab:blue", "tab:orange", "tab:green", "tab:red"), strict=False))
    styles = dict(zip(impls, ("-o", "-s", "-^"), strict=False))
    styles.update(inductor="--", eager=":")
    for ax, name in zip(axes.flat, names, strict=False):
        for h in hiddens:
            rows = sorted(
                (r for r in results if r["case"] == name and r["hidden"] == h),
                key=lambda r: r["tokens"],
            )
            xs = [r["tokens"] for r in rows]
            for series, style in styles.items():
                ys = [r["moved"] / r[series] / 1e9 for r in rows]
                ax.plot(xs, ys, style, color=colors.get(h), ms=3, label=f"{series} H={h}")
        ax.axhline(copy_peak, color="black", lw=1, label="copy bandwidth")
        ax.set_xscale("log")
        ticks = sorted({r["tokens"] for r in results})
        ax.set_xticks(ticks, [str(t) for t in ticks], fontsize=7)
        ax.minorticks_off()
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("tokens")
        ax.set_ylabel("GB/s")
    for ax in list(axes.flat)[len(names) :]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=5)
    fig.suptitle(f"vllm-xdsl kernels vs native eager / Inductor ({device})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot written to {path}")

"""Run every benchmark in bench/ and write its section of bench/RESULTS.md (issue 8).

    python bench/run_all.py [--full] [--only compile_pipeline,model_latency] [--timeout 600]

Each bench runs in its own subprocess, with reduced settings unless --full (REDUCED below:
all of them together are meant to fit in 10 minutes on the 2-core CPU machine when it is
not loaded). For each one, RESULTS.md gets a section `## bench/<name>.py` (or
`## bench/<name>.py (full settings)`) with the machine, date, command, load average, wall
time and the bench's output; sections not written this time are kept as they are, so
sections written elsewhere merge. A bench that needs a GPU and finds
none exits with status 2 and one line on stderr: it is reported as skipped with that line.
compile_pipeline's numbers are also plotted to bench/plots/compile_pipeline.png (stage
breakdown and scaling; needs matplotlib).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
RESULTS = BENCH / "RESULTS.md"
PLOTS = BENCH / "plots"
SKIP_STATUS = 2  # a bench's "cannot run here" exit status (e.g. kernels.py without a GPU)

# Reduced settings for run_all (the full settings are each script's defaults).
REDUCED: dict[str, list[str]] = {
    "compile_pipeline": ["--layers", "1,8,32", "--inductor-layers", "1,8", "--repeat", "1"],
    "model_latency": ["--rounds", "8", "--no-rss"],
    "compile_time": ["--repeat", "2", "--inductor-repeat", "1"],
    # 10 rounds swing the 1-token ratios by +-0.1 on a loaded 2-core machine; 50 hold +-0.01.
    "dispatch_overhead": ["--rounds", "50"],
    "kernels": ["--tokens", "1,16,4096", "--hidden", "4096"],
    "profile_decode": ["--hidden", "256", "--intermediate", "512", "--heads", "4", "--steps", "5"],
}
ORDER = ("compile_pipeline", "model_latency", "compile_time", "dispatch_overhead", "kernels")


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    import torch

    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU"
    return (f"{os.cpu_count()} cores ({cpu}), {gpu}, Python {platform.python_version()}, "
            f"torch {torch.__version__}")


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.1f} / {five:.1f} / {fifteen:.1f}"


def benches(only: list[str] | None) -> list[str]:
    found = sorted(p.stem for p in BENCH.glob("*.py") if p.stem != "run_all" and p.stem[0] != "_")
    names = [n for n in ORDER if n in found] + [n for n in found if n not in ORDER]
    if only:
        unknown = set(only) - set(found)
        if unknown:
            raise SystemExit(f"run_all: no such bench: {', '.join(sorted(unknown))}")
        names = [n for n in names if n in only]
    return names


def run(name: str, full: bool, timeout: float, extra: list[str]) -> dict[str, object]:
    args = ([] if full else REDUCED.get(name, [])) + extra
    cmd = [sys.executable, f"bench/{name}.py", *args]
    start_load, t0 = load(), time.perf_counter()
    print(f"== {' '.join(cmd[1:])}  (load {start_load})", flush=True)
    try:
        proc = subprocess.run(cmd, cwd=BENCH.parent, capture_output=True, text=True,
                              timeout=timeout, check=False)
        rc, out, err = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as e:
        rc, out, err = None, _text(e.stdout), _text(e.stderr) + f"\ntimed out after {timeout:.0f} s"
    wall = time.perf_counter() - t0
    if rc == 0:
        status = "ok"
    elif rc == SKIP_STATUS and len(err.strip().splitlines()) == 1:
        status = f"skipped: {err.strip()}"
    else:
        status = "timed out" if rc is None else f"FAILED (exit status {rc})"
        out += "\n" + "\n".join(err.strip().splitlines()[-15:])
    print(f"   {status} in {wall:.0f} s", flush=True)
    return {"cmd": "python " + " ".join(cmd[1:]), "status": status, "wall": wall,
            "load": f"{start_load} at start, {load()} at end", "output": out.rstrip()}


def _text(b: bytes | str | None) -> str:
    return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")


def title(name: str, full: bool) -> str:
    """Full and reduced runs keep separate sections (a reduced run does not hide a full one)."""
    return f"bench/{name}.py" + (" (full settings)" if full else "")


def section(heading: str, r: dict[str, object], when: str, where: str, plot: str | None) -> str:
    name = Path(heading.split()[0]).stem
    lines = [f"## {heading}", "",
             f"- date: {when}", f"- machine: {where}",
             f"- command: `{r['cmd']}`",
             f"- load average (1/5/15 min): {r['load']}",
             f"- status: {r['status']}, wall time {r['wall']:.0f} s", ""]
    if plot:
        lines += [f"![{name}]({plot})", ""]
    if r["output"] and not str(r["status"]).startswith("skipped"):
        lines += ["```", str(r["output"]), "```", ""]
    return "\n".join(lines)


def merge(sections: dict[str, str], header: str) -> str:
    """RESULTS.md with `sections` replaced or appended; other sections kept."""
    old = RESULTS.read_text() if RESULTS.exists() else ""
    parts = re.split(r"(?m)^(?=## )", old)
    kept: list[tuple[str, str]] = []
    for part in parts[1:]:
        title = part.splitlines()[0][3:].strip()
        kept.append((title, part.rstrip() + "\n"))
    titles = [t for t, _ in kept]
    out = dict(kept)
    for heading, text in sections.items():
        out[heading] = text.rstrip() + "\n"
        if heading not in titles:
            titles.append(heading)
    return header + "\n" + "\n".join(out[t] for t in titles)


def plot_compile_pipeline(data: dict, path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("   plot skipped: matplotlib is not installed")
        return False
    sizes = data["sizes"]
    res = data["results"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.4))
    bottom = [0.0] * len(sizes)
    labels = [str(n) for n in sizes]
    for stage in data["stages"]:
        ms = [res[str(n)]["stages"][stage] * 1e3 for n in sizes]
        left.bar(labels, ms, bottom=bottom, label=stage)
        bottom = [b + m for b, m in zip(bottom, ms, strict=True)]
    left.set(title="ours per stage", xlabel="layers", ylabel="ms")
    left.legend(fontsize=7)
    right.plot(sizes, [res[str(n)]["whole"] for n in sizes], "o-", label="ours (whole)")
    ind = [(n, res[str(n)]["inductor"]) for n in sizes if res[str(n)]["inductor"] is not None]
    if ind:
        right.plot(*zip(*ind, strict=True), "s-", label="Inductor compile_fx_inner")
    right.set(title="scaling", xlabel="layers", ylabel="s", xscale="log", yscale="log")
    right.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(exist_ok=True)
    fig.savefig(path, dpi=70)
    plt.close(fig)
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--full", action="store_true", help="each bench's default settings")
    parser.add_argument("--only", help="comma-separated bench names (default: all)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per bench")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    names = benches(args.only.split(",") if args.only else None)
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    where = machine()
    sections: dict[str, str] = {}
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            extra = ["--json", f"{tmp}/{name}.json"] if name == "compile_pipeline" else []
            r = run(name, args.full, args.timeout, extra)
            r["cmd"] = str(r["cmd"]).replace(f" --json {tmp}/{name}.json", "")
            plot = None
            js = Path(f"{tmp}/{name}.json")
            if js.exists() and not args.no_write:
                png = PLOTS / f"{name}{'_full' if args.full else ''}.png"
                if plot_compile_pipeline(json.loads(js.read_text()), png):
                    plot = f"plots/{png.name}"
            heading = title(name, args.full)
            sections[heading] = section(heading, r, when, where, plot)
    total = time.perf_counter() - t0
    print(f"all benches: {total:.0f} s")
    header = ("# Benchmark results\n\nWritten by `python bench/run_all.py` (one section per "
              "bench; reduced settings unless the command says otherwise). Ratios are measured "
              "side by side in one run; the machine is shared, so the load average is given "
              "with each.\n")
    if args.no_write:
        print("\n".join(sections.values()))
        return
    RESULTS.write_text(merge(sections, header))
    print(f"wrote {RESULTS.relative_to(BENCH.parent)}")


if __name__ == "__main__":
    main()

"""How long do the read commands take as processes, and how much memory do they hold?

Fills the UI benchmark's store (``benchmarks/ui_render.py``: 200 runs, 1,000,000 unit documents
with per-image predictions) and runs each read command as a user does: a fresh ``domainbench``
process, timed from launch to exit, its peak resident set read from the kernel's accounting of
that child (``os.wait4``). Each command runs ``--repeats`` times; the median wall time and the
largest peak RSS are printed, with the issue's targets (< 1 s, < 250 MB) and whether the process
imported the model stack (torch, open_clip, transformers: it must not).

The reference line is an empty ``python -c``: the interpreter's own start-up on this machine, which no
command can go below.

    python benchmarks/cli_startup.py            # 200 runs, 1,000,000 unit documents
    python benchmarks/cli_startup.py --quick    # 20 runs, 50,000 unit documents
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from ui_render import fill  # noqa: E402

WALL_TARGET_S = 1.0
RSS_TARGET_MB = 250
MODEL_STACK = ("torch", "open_clip", "transformers")

#: at exit, a line on stderr: the model-stack packages the process imported, and its peak resident set
#: (VmHWM: this process's own, from exec on; the kernel's ru_maxrss of a child also counts the parent's
#: pages at fork, here the benchmark's own)
EXIT_LINE = """
import atexit, sys
def _exit_line():
    stack = sorted({m.split(".")[0] for m in sys.modules} & %r)
    hwm = next(ln.split()[1] for ln in open("/proc/self/status") if ln.startswith("VmHWM:"))
    sys.stderr.write("\\nEXIT " + ",".join(stack) + " " + hwm + "\\n")
atexit.register(_exit_line)
""" % (set(MODEL_STACK),)
#: the console script's own code path
ENTRY = EXIT_LINE + "sys.argv = ['domainbench', *sys.argv[1:]]\nfrom domainbench.app.cli import main\nmain()\n"


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float, float, int, str, str]:
    """(wall s, CPU s, peak RSS MB, exit status, model-stack packages loaded, stderr) of one process.

    CPU time (user + system) is printed beside the wall time: on a machine shared with other work
    it is the steadier of the two (the wall time also counts the time the process waited for a core).
    """
    cpu0, t0 = _children_cpu(), time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True)
    wall, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
    line = next((ln for ln in done.stderr.splitlines() if ln.startswith("EXIT ")), None)
    if line is None:
        raise SystemExit(f"{argv[3:]} printed no exit line (status {done.returncode}):\n{done.stderr[-2000:]}")
    _, stack, kb = line.split(" ")
    return wall, cpu, int(kb) / 1024, done.returncode, stack, done.stderr


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--units", type=int, default=1_000_000, help="unit documents (with per-image predictions) in all")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--store", type=Path, help="use this filled store (DOMAINBENCH_HOME) instead of filling a new one")
    ap.add_argument("--quick", action="store_true", help="20 runs and 50,000 unit documents")
    args = ap.parse_args()
    runs, units = (20, 50_000) if args.quick else (args.runs, args.units)

    with tempfile.TemporaryDirectory() as tmp:
        home = args.store or Path(tmp) / "store"
        if args.store is None:
            t0 = time.perf_counter()
            ids = fill(home, runs, units)
            print(f"store: {runs} runs, {units:,} unit documents, filled in {time.perf_counter() - t0:.0f} s")
        else:
            from domainbench.store import open_store

            s = open_store(None, home)
            ids = sorted(r.run_id for r in s.list_runs())
            s.close()
            print(f"store: {home} ({len(ids)} runs)")
        a, b = ids[0], ids[1]
        out = Path(tmp) / "out"
        out.mkdir()
        commands = {
            "--help": ["--help"], "metrics": ["metrics"], "ls": ["ls"], "show": ["show", a],
            "export csv": ["export", a, "-o", str(out / "r.csv")], "export json": ["export", a, "-f", "json", "-o", str(out / "r.json")],
            "export --predictions": ["export", a, "--predictions", "-o", str(out / "p.csv")],
            "compare": ["compare", a, b], "check": ["check", a, "-r", "mce <= 100"],
            "report md": ["report", a, "-f", "md", "-o", str(out / "r.md")], "rm (unknown run)": ["rm", "no-such-run"],
        }
        env = {**os.environ, "DOMAINBENCH_HOME": str(home)}
        env.pop("DOMAINBENCH_MONGO_URI", None)
        timed([sys.executable, "-c", ENTRY, "--help"], env)  # page cache warm: the first process reads the files
        base = [timed([sys.executable, "-c", EXIT_LINE], env) for _ in range(args.repeats)]
        print(f"\ninterpreter start-up (python -c, empty): {statistics.median(b[0] for b in base):.2f} s wall, "
              f"{statistics.median(b[1] for b in base):.2f} s CPU, {max(b[2] for b in base):.0f} MB\n")
        print(f"load average before the commands: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        print(f"{'command':<22}{'wall (median)':>14}{'CPU (median)':>13}{'peak RSS':>10}{'model stack':>13}"
              f"  targets (< {WALL_TARGET_S:g} s, < {RSS_TARGET_MB} MB)")
        for name, argv in commands.items():
            got = [timed([sys.executable, "-c", ENTRY, *argv], env) for _ in range(args.repeats)]
            wall, cpu, rss = statistics.median(g[0] for g in got), statistics.median(g[1] for g in got), max(g[2] for g in got)
            code, stack = got[-1][3], got[-1][4]
            expected = 2 if name.startswith("rm") else 0
            if code != expected:
                raise SystemExit(f"{name} exited {code}:\n{got[-1][5][-2000:]}")
            ok = "yes" if wall < WALL_TARGET_S and rss < RSS_TARGET_MB else "NO"
            print(f"{name:<22}{wall:>13.2f}s{cpu:>12.2f}s{rss:>8.0f}MB{stack or 'none':>13}  {ok}")
        print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""gpudoctor's NCCL log benchmark (issue 15): how fast `gpudoctor check --only nccl --nccl-log
FILE` reads a multi-hundred-MiB log, side by side with `grep -c NCCL` on the same file in the
same run. Target: at least a third of grep's throughput (gpudoctor's wall time at most 3x
grep's), memory flat. Not a test and not run by CI; docs/performance.md shows its output.

    python3 benches/nccl.py                  # build --release, generate 256 and 512 MiB logs
    python3 benches/nccl.py --quick          # 64 MiB logs, 3 runs
    python3 benches/nccl.py --cpus 0         # pin both commands to one CPU (taskset)

Two logs per size, generated under `<target>/bench/` and kept between runs:
- plain: the healthy fixture's header and table around NCCL_DEBUG=INFO channel lines of 8
  ranks (what `benches/check.py` measures);
- decorated: the same lines as a launcher delivers them, every line behind Open MPI's
  `[1,N]<stdout>:` tag and Slurm's padded `--label` (the prefixes issue 15 is about).

The commands alternate (grep, gpudoctor, grep, ...) after one warm-up each that fills the page
cache; the table shows median wall time and median CPU time (user + system, from wait4), the
throughput (file size / median wall) and gpudoctor's largest peak RSS. grep's output goes to a
pipe: GNU grep stops at the first match when its output is /dev/null. Stdlib only.
"""

import argparse
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET_RATIO = 3.0  # gpudoctor's wall time at most 3x grep -c's (a third of its throughput)


def check_module():
    """benches/check.py, for its log generator and machine description."""
    spec = importlib.util.spec_from_file_location("check", os.path.join(REPO, "benches",
                                                                       "check.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def decorate(src: str, dst: str) -> None:
    """Every line of `src` behind `NN: [1,R]<stdout>:` (Slurm --label, then Open MPI's tag; the
    rank taken from the NCCL line's `[dev]`, 0 for nccl-tests' own lines)."""
    with open(src, encoding="utf-8") as f, open(dst, "w", encoding="utf-8") as out:
        for line in f:
            rank = 0
            if "] NCCL INFO" in line:
                rank = int(line.split(" [", 1)[1].split("]", 1)[0])
            out.write(f"{rank:2d}: [1,{rank}]<stdout>:{line}")


def run_once(argv):
    """Wall seconds, CPU seconds (user + system), peak RSS KiB, exit status, stdout."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    return (wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss,
            os.waitstatus_to_exitcode(status), out)


def pinned(argv, cpus):
    return (["taskset", "-c", cpus] + argv) if cpus else argv


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--cpus", help="taskset CPU list for both commands, e.g. 0")
    ap.add_argument("--binary", help="a built gpudoctor (default: cargo build --release)")
    args = ap.parse_args()
    runs = 3 if args.quick else args.runs
    check = check_module()

    binary = args.binary
    if binary is None:
        subprocess.run(["cargo", "build", "--release", "--locked"], cwd=REPO, check=True,
                       stdout=sys.stderr)
        binary = os.path.join(check.target_dir(), "release", "gpudoctor")
    grep = shutil.which("grep")
    work = os.path.join(check.target_dir(), "bench")
    os.makedirs(work, exist_ok=True)
    empty = tempfile.mkdtemp(prefix="gpudoctor-bench-root-")

    sizes = [64] if args.quick else [256, 512]
    rows = []
    for mib in sizes:
        plain = os.path.join(work, f"nccl-{mib}mib.log")
        if not os.path.exists(plain) or os.path.getsize(plain) < mib << 20:
            print(f"generating {plain} ...", file=sys.stderr)
            check.nccl_log(plain, mib)
        decorated = os.path.join(work, f"nccl-{mib}mib-decorated.log")
        if (not os.path.exists(decorated)
                or os.path.getmtime(decorated) < os.path.getmtime(plain)):
            print(f"generating {decorated} ...", file=sys.stderr)
            decorate(plain, decorated)
        for kind, path in (("plain", plain), ("decorated", decorated)):
            size = os.path.getsize(path)
            g_argv = pinned([grep, "-c", "NCCL", path], args.cpus)
            d_argv = pinned([binary, "check", "--only", "nccl", "--format", "json",
                             "--nvml-lib", "/nonexistent/libnvidia-ml.so.1", "--root", empty,
                             "--nccl-log", path], args.cpus)
            run_once(g_argv)
            run_once(d_argv)
            g, d = [], []
            for _ in range(runs):
                g.append(run_once(g_argv))
                d.append(run_once(d_argv))
            report = d[-1][4].decode("utf-8", "replace")
            if '"nccl.run_completed"' not in report:
                print(f"gpudoctor did not judge {path}", file=sys.stderr)
                return 1
            rows.append((mib, kind, size, g, d))
    os.rmdir(empty)

    print(f"machine: {check.machine()}")
    print(f"gpudoctor: {binary}; grep: {grep}; pinned to CPUs {args.cpus or 'any'}; {runs} runs "
          "each, alternating, median")
    print()
    print("| log | size | `grep -c NCCL` wall / CPU | gpudoctor wall / CPU | grep MB/s | "
          "gpudoctor MB/s | wall ratio | gpudoctor peak RSS |")
    print("|---|---|---|---|---|---|---|---|")
    worst = 0.0
    for mib, kind, size, g, d in rows:
        gw = statistics.median(r[0] for r in g)
        gc = statistics.median(r[1] for r in g)
        dw = statistics.median(r[0] for r in d)
        dc = statistics.median(r[1] for r in d)
        rss = max(r[2] for r in d) / 1024
        ratio = dw / gw
        worst = max(worst, ratio)
        print(f"| {kind} | {size / 2**20:.0f} MiB | {gw * 1000:.0f} / {gc * 1000:.0f} ms | "
              f"{dw * 1000:.0f} / {dc * 1000:.0f} ms | {size / 1e6 / gw:.0f} | "
              f"{size / 1e6 / dw:.0f} | {ratio:.2f}x | {rss:.1f} MiB |")
    print()
    print(f"target: gpudoctor at least 1/{TARGET_RATIO:.0f} of grep -c's throughput (wall ratio "
          f"<= {TARGET_RATIO:.1f}x): worst {worst:.2f}x "
          f"({'met' if worst <= TARGET_RATIO else 'NOT met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

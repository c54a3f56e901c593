#!/usr/bin/env python3
"""gpudoctor's NCCL log benchmark (issues 15, 28, 41): how fast `gpudoctor check --only nccl
--nccl-log FILE` reads a log of hundreds of MiB built from real logs, side by side with
`grep -c NCCL` on the same file in the same run. Targets (issues 28, 41): at least 600 MB/s on
every judged log, and gpudoctor's wall time at most 3x grep's on the INFO logs — on two CPUs and
on one (issue 41: a node whose other CPUs are busy gives the parser one). Memory flat. Not a test
and not run by CI; docs/performance.md shows its output.

    python3 benches/nccl.py                  # build --release, 256 MiB logs, 7 runs, 2 and 1 CPUs
    python3 benches/nccl.py --quick          # 128 MiB logs, 3 runs
    python3 benches/nccl.py --cpus 0         # only one setting: both commands pinned to CPU 0
    python3 benches/nccl.py --cpus 0,1 --cpus 0   # the settings the default measures, named
    python3 benches/nccl.py --generated      # also the generated logs of issue 15 (not judged)

Every setting pins both commands with taskset (the default: the first two CPUs this process may
run on, then the first one alone) and gets a table and verdicts of its own.

The judged logs are built from real ones (tests/data/nccl/real/, copied byte for byte from
public sources), repeated whole to the size, kept under `<target>/bench/` between runs:
- info-dense: `nccl-tests-287-rtx5090-two-gpus-info.log`, an `NCCL_DEBUG=INFO` run (58 of its 77
  lines are NCCL lines: INFO of every kind, WARNs, a CUDA failure), what a log of an application
  with NCCL_DEBUG=INFO is mostly made of;
- info-mixed (issue 41): every `NCCL INFO` and `NCCL WARN` line of every real log there, in the
  order of the files' names and of their lines (159 lines of ten logs: channel, ring, tree and
  topology lines of several NCCL versions and hosts, behind Open MPI, Slurm, Ray and per-rank
  prefixes), so no one log's shapes dominate;
- table-dense: `nccl-tests-cluster-h100-single-node-cnode3-002.log`, five nccl-tests tables of
  8 x H100 (every third line a result row, the rest headers and footers), what a long sweep of
  many tests is made of. grep finds no `NCCL` in it and runs at memory speed: the grep ratio is
  not judged here.
A generated log repeats a handful of line shapes the parser may special-case; repeating real
logs keeps every shape real output has in the measure. `--generated` adds issue 15's generated
logs (channel lines of 8 ranks, plain and behind launcher prefixes) as extra rows.

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
REAL = os.path.join(REPO, "tests", "data", "nccl", "real")
TARGET_MB_S = 600.0  # each judged log (issue 28)
TARGET_RATIO = 3.0  # gpudoctor's wall time at most 3x grep -c's on the INFO logs
NEWLINE = b"\n"
MIXED = "every NCCL INFO/WARN line of tests/data/nccl/real/*.log"
# (row name, real log repeated (or MIXED), whether the grep ratio is judged on it)
JUDGED = [
    ("info-dense", "nccl-tests-287-rtx5090-two-gpus-info.log", True),
    ("info-mixed", MIXED, True),
    ("table-dense", "nccl-tests-cluster-h100-single-node-cnode3-002.log", False),
]


def real_logs():
    """The real logs, in the order of their names."""
    return sorted(os.path.join(REAL, n) for n in os.listdir(REAL) if n.endswith(".log"))


def mixed_lines() -> bytes:
    """Every line holding `NCCL INFO` or `NCCL WARN` of every real log, in order, each ending
    with a newline: the source of the info-mixed log."""
    out = []
    for path in real_logs():
        with open(path, "rb") as f:
            for line in f.read().splitlines():
                if b"NCCL INFO" in line or b"NCCL WARN" in line:
                    out.append(line + b"\n")
    return b"".join(out)


def check_module():
    """benches/check.py, for its log generator and machine description."""
    spec = importlib.util.spec_from_file_location("check", os.path.join(REPO, "benches",
                                                                       "check.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def repeated(data: bytes, newest: float, dst: str, mib: int) -> None:
    """`data` written whole again and again into `dst` until it holds at least `mib` MiB (a
    newline put between copies when it does not end with one). Rebuilt when missing, smaller,
    or older than `newest` (the modification time of what `data` was read from)."""
    want = mib << 20
    if (os.path.exists(dst) and os.path.getsize(dst) >= want
            and os.path.getmtime(dst) >= newest):
        return
    print(f"building {dst} ...", file=sys.stderr)
    if not data.endswith(b"\n"):
        data += b"\n"
    copies = -(-want // len(data))
    block = data * max(1, (1 << 20) // len(data))
    with open(dst + ".tmp", "wb") as out:
        written = 0
        while written + len(block) <= copies * len(data):
            out.write(block)
            written += len(block)
        while written < copies * len(data):
            out.write(data)
            written += len(data)
    os.replace(dst + ".tmp", dst)


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


def logs(args, check, work):
    """(row name, path, judged?, grep ratio judged?) of every log to measure."""
    mib = 128 if args.quick else args.mib
    out = []
    for name, real, ratio_judged in JUDGED:
        path = os.path.join(work, f"nccl-real-{name}-{mib}mib.log")
        if real == MIXED:
            data = mixed_lines()
            newest = max(os.path.getmtime(p) for p in real_logs())
            what = f"{real} ({data.count(NEWLINE)} lines)"
        else:
            src = os.path.join(REAL, real)
            with open(src, "rb") as f:
                data = f.read()
            newest = os.path.getmtime(src)
            what = f"`{real}`"
        repeated(data, newest, path, mib)
        copies = os.path.getsize(path) // len(data)
        out.append((f"{name}: {what} x{copies}", path, True, ratio_judged))
    if args.generated:
        plain = os.path.join(work, f"nccl-{mib}mib.log")
        if not os.path.exists(plain) or os.path.getsize(plain) < mib << 20:
            print(f"generating {plain} ...", file=sys.stderr)
            check.nccl_log(plain, mib)
        decorated = os.path.join(work, f"nccl-{mib}mib-decorated.log")
        if (not os.path.exists(decorated)
                or os.path.getmtime(decorated) < os.path.getmtime(plain)):
            print(f"generating {decorated} ...", file=sys.stderr)
            decorate(plain, decorated)
        out.append(("generated plain (not judged)", plain, False, False))
        out.append(("generated decorated (not judged)", decorated, False, False))
    return out


def default_settings():
    """The first two CPUs this process may run on, then the first alone (issue 41's two
    settings; on a two-CPU box the first is every CPU)."""
    allowed = sorted(os.sched_getaffinity(0))
    first = [",".join(str(c) for c in allowed[:2]), str(allowed[0])]
    return first if len(allowed) > 1 else first[1:]


def measure(binary, grep, path, runs, cpus, empty):
    """grep's and gpudoctor's runs on `path` pinned to `cpus`, alternating after a warm-up each;
    None when gpudoctor did not judge the log."""
    g_argv = pinned([grep, "-c", "NCCL", path], cpus)
    d_argv = pinned([binary, "check", "--only", "nccl", "--format", "json",
                     "--nvml-lib", "/nonexistent/libnvidia-ml.so.1", "--root", empty,
                     "--nccl-log", path], cpus)
    run_once(g_argv)
    run_once(d_argv)
    g, d = [], []
    for _ in range(runs):
        g.append(run_once(g_argv))
        d.append(run_once(d_argv))
    report = d[-1][4].decode("utf-8", "replace")
    if '"nccl.run_completed"' not in report:
        return None
    return g, d


def table(rows):
    """Print one setting's table; its verdicts as (what, ok)."""
    print("| log | size | `grep -c NCCL` wall / CPU | gpudoctor wall / CPU | grep MB/s | "
          "gpudoctor MB/s | wall ratio | gpudoctor peak RSS | target |")
    print("|---|---|---|---|---|---|---|---|---|")
    verdicts = []
    for name, size, judged, ratio_judged, g, d in rows:
        gw = statistics.median(r[0] for r in g)
        gc = statistics.median(r[1] for r in g)
        dw = statistics.median(r[0] for r in d)
        dc = statistics.median(r[1] for r in d)
        rss = max(r[2] for r in d) / 1024
        mbps = size / 1e6 / dw
        ratio = dw / gw
        target = "not judged"
        if judged:
            short = name.split(":")[0]
            speed_ok = mbps >= TARGET_MB_S
            parts = [f"{'pass' if speed_ok else 'FAIL'} >= {TARGET_MB_S:.0f} MB/s"]
            verdicts.append((f"{short}: {mbps:.0f} MB/s", speed_ok))
            if ratio_judged:
                ratio_ok = ratio <= TARGET_RATIO
                parts.append(f"{'pass' if ratio_ok else 'FAIL'} <= {TARGET_RATIO:.0f}x grep")
                verdicts.append((f"{short}: {ratio:.2f}x grep", ratio_ok))
            target = ", ".join(parts)
        print(f"| {name} | {size / 2**20:.0f} MiB | {gw * 1000:.0f} / {gc * 1000:.0f} ms | "
              f"{dw * 1000:.0f} / {dc * 1000:.0f} ms | {size / 1e6 / gw:.0f} | "
              f"{mbps:.0f} | {ratio:.2f}x | {rss:.1f} MiB | {target} |")
    return verdicts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--mib", type=int, default=256, help="log size (default 256; --quick: 128)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--generated", action="store_true",
                    help="also measure issue 15's generated logs (extra rows, not judged)")
    ap.add_argument("--cpus", action="append",
                    help="taskset CPU list for both commands, e.g. 0; repeat for several "
                    "settings (default: the first two allowed CPUs, then the first alone)")
    ap.add_argument("--binary", help="a built gpudoctor (default: cargo build --release)")
    args = ap.parse_args()
    runs = 3 if args.quick else args.runs
    check = check_module()
    settings = args.cpus or default_settings()

    binary = args.binary
    if binary is None:
        subprocess.run(["cargo", "build", "--release", "--locked"], cwd=REPO, check=True,
                       stdout=sys.stderr)
        binary = os.path.join(check.target_dir(), "release", "gpudoctor")
    grep = shutil.which("grep")
    work = os.path.join(check.target_dir(), "bench")
    os.makedirs(work, exist_ok=True)
    empty = tempfile.mkdtemp(prefix="gpudoctor-bench-root-")

    # Every log in one setting, then the next: the settings a few seconds apart, not minutes.
    results = []
    to_measure = logs(args, check, work)
    for cpus in settings:
        rows = []
        for name, path, judged, ratio_judged in to_measure:
            measured = measure(binary, grep, path, runs, cpus, empty)
            if measured is None:
                print(f"gpudoctor did not judge {path}", file=sys.stderr)
                return 1
            rows.append((name, os.path.getsize(path), judged, ratio_judged) + measured)
        results.append((cpus, rows, os.getloadavg()[0]))
    os.rmdir(empty)

    print(f"machine: {check.machine()}")
    print(f"gpudoctor: {binary}; grep: {grep}; {runs} runs each, alternating, median")
    summary = []
    for cpus, rows, load in results:
        count = len(cpus.split(","))
        print()
        print(f"pinned to CPUs {cpus} ({count} CPU{'s' if count > 1 else ''}; load average "
              f"{load:.2f} after):")
        print()
        verdicts = table(rows)
        summary.append((cpus, verdicts))
    print()
    met = all(ok for _, verdicts in summary for _, ok in verdicts)
    print(f"targets (issues 28, 41): >= {TARGET_MB_S:.0f} MB/s on each judged log, <= "
          f"{TARGET_RATIO:.0f}x grep -c's wall time on the INFO logs, in every CPU setting: "
          f"{'PASS' if met else 'FAIL'}")
    for cpus, verdicts in summary:
        for what, ok in verdicts:
            print(f"  {'pass' if ok else 'FAIL'}: CPUs {cpus}: {what}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

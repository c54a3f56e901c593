#!/usr/bin/env python3
"""gpudoctor's NCCL log benchmark (issues 15, 28): how fast `gpudoctor check --only nccl
--nccl-log FILE` reads a log of hundreds of MiB built by repeating a real log, side by side with
`grep -c NCCL` on the same file in the same run. Targets (issue 28): at least 600 MB/s on both
judged logs, and gpudoctor's wall time at most 3x grep's on the INFO-dense one. Memory flat. Not a
test and not run by CI; docs/performance.md shows its output.

    python3 benches/nccl.py                  # build --release, 256 MiB logs, 7 runs
    python3 benches/nccl.py --quick          # 128 MiB logs, 3 runs
    python3 benches/nccl.py --cpus 0         # pin both commands to one CPU (taskset)
    python3 benches/nccl.py --generated      # also the generated logs of issue 15 (not judged)

The judged logs are real ones (tests/data/nccl/real/, copied byte for byte from public sources)
repeated whole to the size, kept under `<target>/bench/` between runs:
- info-dense: `nccl-tests-287-rtx5090-two-gpus-info.log`, an `NCCL_DEBUG=INFO` run (58 of its 77
  lines are NCCL lines: INFO of every kind, WARNs, a CUDA failure), what a log of an application
  with NCCL_DEBUG=INFO is mostly made of;
- table-dense: `nccl-tests-cluster-h100-single-node-cnode3-002.log`, five nccl-tests tables of
  8 x H100 (every third line a result row, the rest headers and footers), what a long sweep of
  many tests is made of.
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
TARGET_RATIO = 3.0  # gpudoctor's wall time at most 3x grep -c's on the INFO-dense log
# (row name, real log repeated, whether the grep ratio is judged on it)
JUDGED = [
    ("info-dense", "nccl-tests-287-rtx5090-two-gpus-info.log", True),
    ("table-dense", "nccl-tests-cluster-h100-single-node-cnode3-002.log", False),
]


def check_module():
    """benches/check.py, for its log generator and machine description."""
    spec = importlib.util.spec_from_file_location("check", os.path.join(REPO, "benches",
                                                                       "check.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def repeated(src: str, dst: str, mib: int) -> None:
    """`src` written whole again and again into `dst` until it holds at least `mib` MiB (a
    newline put between copies when `src` does not end with one). Rebuilt when missing, smaller,
    or older than `src`."""
    want = mib << 20
    if (os.path.exists(dst) and os.path.getsize(dst) >= want
            and os.path.getmtime(dst) >= os.path.getmtime(src)):
        return
    print(f"building {dst} ...", file=sys.stderr)
    with open(src, "rb") as f:
        data = f.read()
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
        src = os.path.join(REAL, real)
        repeated(src, path, mib)
        copies = os.path.getsize(path) // os.path.getsize(src)
        out.append((f"{name}: `{real}` x{copies}", path, True, ratio_judged))
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--mib", type=int, default=256, help="log size (default 256; --quick: 128)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--generated", action="store_true",
                    help="also measure issue 15's generated logs (extra rows, not judged)")
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

    rows = []
    for name, path, judged, ratio_judged in logs(args, check, work):
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
        rows.append((name, size, judged, ratio_judged, g, d))
    os.rmdir(empty)

    print(f"machine: {check.machine()}")
    print(f"gpudoctor: {binary}; grep: {grep}; pinned to CPUs {args.cpus or 'any'}; {runs} runs "
          "each, alternating, median")
    print()
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
            speed_ok = mbps >= TARGET_MB_S
            parts = [f"{'pass' if speed_ok else 'FAIL'} >= {TARGET_MB_S:.0f} MB/s"]
            verdicts.append((f"{name}: {mbps:.0f} MB/s", speed_ok))
            if ratio_judged:
                ratio_ok = ratio <= TARGET_RATIO
                parts.append(f"{'pass' if ratio_ok else 'FAIL'} <= {TARGET_RATIO:.0f}x grep")
                verdicts.append((f"{name}: {ratio:.2f}x grep", ratio_ok))
            target = ", ".join(parts)
        print(f"| {name} | {size / 2**20:.0f} MiB | {gw * 1000:.0f} / {gc * 1000:.0f} ms | "
              f"{dw * 1000:.0f} / {dc * 1000:.0f} ms | {size / 1e6 / gw:.0f} | "
              f"{mbps:.0f} | {ratio:.2f}x | {rss:.1f} MiB | {target} |")
    print()
    met = all(ok for _, ok in verdicts)
    print(f"targets (issue 28): >= {TARGET_MB_S:.0f} MB/s on each judged log, <= "
          f"{TARGET_RATIO:.0f}x grep -c's wall time on the INFO-dense one: "
          f"{'PASS' if met else 'FAIL'}")
    for what, ok in verdicts:
        print(f"  {'pass' if ok else 'FAIL'}: {what}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

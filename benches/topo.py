#!/usr/bin/env python3
"""gpudoctor's topology-size benchmark (issue 30 finding 4): wall time, peak memory and output size
of `gpudoctor topo` (table and `--format json`) and of `gpudoctor check --only topology` on
synthetic nodes with thousands of GPUs, given as a directory and as a `.tar.gz` capture. A real
node has 8-72 GPUs and up to 16 NICs; a hostile or broken capture can hold thousands (about 8 000
still fit the default unpack limits, docs/security.md), and before issue 30 the matrix grew with
the square of that. Not a test and not run by CI; docs/performance.md shows its output.

    python3 benches/topo.py                  # build --release, generate, measure, print a table
    python3 benches/topo.py --binary PATH    # measure a given build (e.g. an older one)
    python3 benches/topo.py --sizes 2000,3000 --runs 1 --cpus 0
    python3 benches/topo.py --no-tar         # directories only: unpacking dominates the .tar.gz
    python3 benches/topo.py --generate 3000 --out /tmp/n3000   # only write a node (and .tar.gz)

A node: GPUs (NVIDIA, class 0x030200) 256 to a bus behind one PCIe switch per host bridge, one
host bridge (PCI domain) per 750 GPUs, host bridges alternating between two NUMA nodes, and one
ConnectX RDMA NIC (class 0x020700) under each switch, so every link class but NV# appears. Only
the files the topology facts read are written, plus `.gpudoctor/manifest.json` so it replays.
Nodes live under `<target>/bench/topo-<N>/` between runs (regenerated when this script changes).
Measurement as benches/check.py does it (median wall of `--runs` runs after a warm-up, largest
peak RSS from GNU time). Stdlib only.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check as bench  # noqa: E402  (benches/check.py: measure, pinned, machine, target_dir)

PER_HOST_BRIDGE = 750
CPUS_PER_NODE = 32
TARGET_RSS_MIB = 200.0
TARGET_WALL_MS = 3000.0


def write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def function(root: str, sysdir: str, bdf: str, vendor: int, device: int, cls: int,
             numa: int) -> None:
    d = os.path.join(root, sysdir)
    cpus = f"{numa * CPUS_PER_NODE}-{(numa + 1) * CPUS_PER_NODE - 1}"
    for name, text in (("vendor", f"0x{vendor:04x}"), ("device", f"0x{device:04x}"),
                       ("class", f"0x{cls:06x}"), ("numa_node", str(numa)),
                       ("local_cpulist", cpus), ("current_link_speed", "32.0 GT/s PCIe"),
                       ("max_link_speed", "32.0 GT/s PCIe"), ("current_link_width", "16"),
                       ("max_link_width", "16")):
        write(os.path.join(d, name), text + "\n")
    link = os.path.join(root, "sys", "bus", "pci", "devices", bdf)
    os.makedirs(os.path.dirname(link), exist_ok=True)
    # Relative, as on a real node: sys/bus/pci/devices/<bdf> -> ../../../devices/...
    os.symlink(os.path.join("..", "..", "..", os.path.relpath(sysdir, "sys")), link)


def generate(root: str, gpus: int) -> None:
    """Write a node with `gpus` GPUs to `root` (see the module docstring for its shape)."""
    shutil.rmtree(root, ignore_errors=True)
    for n in range(2):
        node = os.path.join(root, "sys", "devices", "system", "node", f"node{n}")
        write(os.path.join(node, "cpulist"),
              f"{n * CPUS_PER_NODE}-{(n + 1) * CPUS_PER_NODE - 1}\n")
        write(os.path.join(node, "distance"), "10 21\n" if n == 0 else "21 10\n")
    left, domain = gpus, 0
    while left > 0:
        here, left = min(left, PER_HOST_BRIDGE), left - min(left, PER_HOST_BRIDGE)
        numa = domain % 2
        host = f"sys/devices/pci{domain:04x}:00"
        bridge = 0x8086, 0x2030, 0x060400  # root port; the switch ports are Broadcom PEX
        rp_bdf = f"{domain:04x}:00:01.0"
        rp = f"{host}/{rp_bdf}"
        function(root, rp, rp_bdf, *bridge, numa)
        up_bdf = f"{domain:04x}:01:00.0"
        up = f"{rp}/{up_bdf}"
        function(root, up, up_bdf, 0x1000, 0xc030, 0x060400, numa)
        buses = (here + 255) // 256
        for port in range(buses + 1):
            down_bdf = f"{domain:04x}:02:{port:02x}.0"
            down = f"{up}/{down_bdf}"
            function(root, down, down_bdf, 0x1000, 0xc030, 0x060400, numa)
            bus = 3 + port
            if port == buses:
                nic_bdf = f"{domain:04x}:{bus:02x}:00.0"
                function(root, f"{down}/{nic_bdf}", nic_bdf, 0x15b3, 0x1021, 0x020700, numa)
                continue
            for k in range(min(256, here - port * 256)):
                gpu_bdf = f"{domain:04x}:{bus:02x}:{k // 8:02x}.{k % 8}"
                function(root, f"{down}/{gpu_bdf}", gpu_bdf, 0x10de, 0x2330, 0x030200, numa)
        domain += 1
    manifest = {
        "format_version": 1,
        "node": f"synthetic-{gpus}-gpus",
        "description": f"Synthetic node with {gpus} GPUs for benches/topo.py (issue 30).",
        "made": {"how": "hand-built", "from": None, "edit": f"benches/topo.py --generate {gpus}"},
    }
    write(os.path.join(root, ".gpudoctor", "manifest.json"), json.dumps(manifest, indent=2))


def pack(root: str, archive: str) -> None:
    with tarfile.open(archive, "w:gz") as tar:
        for name in sorted(os.listdir(root)):
            tar.add(os.path.join(root, name), arcname=name)


def node(work: str, gpus: int):
    root = os.path.join(work, f"topo-{gpus}")
    archive = root + ".tar.gz"
    stamp = os.path.join(root, ".gpudoctor", "manifest.json")
    if not os.path.exists(stamp) or os.path.getmtime(stamp) < os.path.getmtime(__file__):
        print(f"generating {root} ...", file=sys.stderr)
        generate(root, gpus)
        pack(root, archive)
    return root, archive


def output_bytes(argv) -> int:
    return len(subprocess.run(argv, capture_output=True).stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sizes", default="2000,3000,8000", help="GPU counts, comma-separated")
    ap.add_argument("--cpus", help="taskset CPU list for every measured command, e.g. 0,1")
    ap.add_argument("--binary", help="a built gpudoctor (default: cargo build --release)")
    ap.add_argument("--no-tar", action="store_true",
                    help="directories only (unpacking a .tar.gz of thousands of GPUs takes a minute)")
    ap.add_argument("--generate", type=int, help="only write a node with this many GPUs")
    ap.add_argument("--out", help="with --generate: where (a .tar.gz is written beside it)")
    args = ap.parse_args()
    if args.generate is not None:
        if not args.out:
            ap.error("--generate needs --out")
        generate(args.out, args.generate)
        pack(args.out, args.out.rstrip("/") + ".tar.gz")
        return 0

    binary = args.binary
    if binary is None:
        subprocess.run(["cargo", "build", "--release", "--locked"], cwd=bench.REPO, check=True,
                       stdout=sys.stderr)
        binary = os.path.join(bench.target_dir(), "release", "gpudoctor")
    work = os.path.join(bench.target_dir(), "bench")
    os.makedirs(work, exist_ok=True)
    cpus = args.cpus

    print(f"machine: {bench.machine()}")
    print(f"gpudoctor: {binary}; pinned to CPUs {cpus or 'any'}; {args.runs} runs, median")
    print()
    print("| GPUs | root | command | wall (cpu) | peak RSS | stdout |")
    print("|---|---|---|---|---|---|")
    worst = {}
    for gpus in (int(s) for s in args.sizes.split(",") if s):
        root, archive = node(work, gpus)
        roots = [("dir", root)] + ([] if args.no_tar else [(".tar.gz", archive)])
        for kind, path in roots:
            commands = [
                ("`topo`", ["topo", "--no-nvml", "--root", path]),
                ("`topo --format json`", ["topo", "--no-nvml", "--format", "json", "--root",
                                          path]),
                # A capture answers NVML from its files (none here: "not recorded").
                ("`check --only topology`", ["check", "--only", "topology", "--format", "json",
                                             "--root", path]),
            ]
            for name, argv in commands:
                argv = bench.pinned([binary] + argv, cpus)
                m = bench.measure(argv, args.runs)
                size = output_bytes(argv)
                print(f"| {gpus} | {kind} | {name} | {m['median_ms']:.0f} ms "
                      f"({m['cpu_ms']:.0f}) | {m['max_rss_mib']:.1f} MiB | "
                      f"{size / 1024:.0f} KiB |", flush=True)
                if gpus == 3000 and name.startswith("`topo"):
                    w = worst.setdefault(gpus, [0.0, 0.0])
                    w[0], w[1] = max(w[0], m["median_ms"]), max(w[1], m["max_rss_mib"])
    if 3000 in worst:
        wall, rss = worst[3000]
        print()
        print(f"target: topo on 3000 GPUs < {TARGET_RSS_MIB:.0f} MiB: {rss:.1f} MiB "
              f"({'met' if rss < TARGET_RSS_MIB else 'NOT met'}); < {TARGET_WALL_MS:.0f} ms: "
              f"{wall:.0f} ms ({'met' if wall < TARGET_WALL_MS else 'NOT met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

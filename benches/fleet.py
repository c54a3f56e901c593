#!/usr/bin/env python3
"""gpudoctor's fleet benchmark (issues 17 and 27): wall time and peak memory of `gpudoctor fleet`
over a thousand and ten thousand saved reports or nodes' series (target: under a second for
both). Not a test and not run by CI; docs/performance.md shows its output.

    python3 benches/fleet.py                  # build --release, generate, measure, print a table
    python3 benches/fleet.py --cpus 0,1       # pin the measured command to two CPUs (taskset)
    python3 benches/fleet.py --quick          # fewer runs, no 10 000-report fleet
    python3 benches/fleet.py --generate 12 --out /tmp/fleet   # only write a fleet (README demo)

`fleet --prometheus` is measured too (issue 27): a loopback HTTP server (stdlib) answers the four
instant queries of src/fleet/prometheus/mod.rs as Prometheus would, with the series of 1 000 and
10 000 nodes — each node one of the fleet's reports rendered by `gpudoctor render --format
prometheus`, its own target labels (`job`, `instance`) and host name — so what is measured is
gpudoctor's side: the requests, reading the answers, grouping the series into nodes and the
summary.

The reports are real ones: `gpudoctor check --keep-going --format json` of fixtures (half of
them with `--with-facts`, as a DaemonSet that keeps facts for `diff` saves them), copied per
node with the node's name, a bus bandwidth spread of under a percent, a few slow nodes and a
failing check on most nodes, one file in fifty from an older or a newer gpudoctor, and a few
files that are not reports. They live under `<target>/bench/fleet-<N>/` between runs
(regenerated when this script or the binary changes). Measurement as benches/check.py does it
(median wall of `--runs` runs after a warm-up, largest peak RSS from GNU time). Stdlib only.
"""

import argparse
import http.server
import json
import os
import random
import re
import shutil
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check as bench  # noqa: E402  (benches/check.py: measure, pinned, machine, target_dir)

REPO = bench.REPO
TARGET_MS = 1000.0
FIXTURES = ["h100-nccl-healthy", "h100-nccl-low-bandwidth", "h100-containerd-no-nvidia-runtime",
            "h100-ib-port-hdr", "hgx-h100-healthy"]


def base_reports(binary):
    out = {}
    for name in FIXTURES:
        for facts in (False, True):
            argv = [binary, "check", "--keep-going", "--format", "json", "--root",
                    os.path.join(REPO, "fixtures", name)]
            if facts:
                argv.append("--with-facts")
            run = subprocess.run(argv, capture_output=True, text=True)
            out[(name, facts)] = json.loads(run.stdout)
    return out


def layer(report, lid):
    return next(l for l in report["layers"] if l["id"] == lid)


def generate(binary, n, out):
    """`n` node reports (and a few files that are not reports) under `out`, deterministic."""
    rng = random.Random(17)
    base = base_reports(binary)
    shutil.rmtree(out, ignore_errors=True)
    for i in range(n):
        facts = i % 2 == 1
        r = json.loads(json.dumps(base[("h100-nccl-healthy", facts)]))
        r["node"]["hostname"] = f"gpu-{i:05d}"
        for check in layer(r, "nccl")["checks"]:
            for f in check.get("figures", []):
                f["value"] *= 1 + rng.uniform(-0.004, 0.004)
        # Failures: a layer of the fixture that has it, in place of the healthy one.
        for fixture, lid, hit in (
                ("h100-containerd-no-nvidia-runtime", "toolkit", i % 10 < 6),  # a bad rollout
                ("h100-nccl-low-bandwidth", "nccl", i % 97 == 5),              # a slow node
                ("h100-ib-port-hdr", "rdma", i % 211 == 7)):                   # a port at HDR
            if hit:
                idx = r["layers"].index(layer(r, lid))
                r["layers"][idx] = base[(fixture, facts)]["layers"][idx]
                r["exit_code"] = 1
        if i % 50 == 0:  # an older gpudoctor: no generated_at, no figures
            r.pop("generated_at", None)
            for l in r["layers"]:
                for c in l["checks"]:
                    c.pop("figures", None)
        if i % 50 == 1:  # a newer one: an unknown field and layer
            r["from_the_future"] = {"x": 1}
            r["layers"].append({"id": "storage", "status": "pass", "checks": []})
        d = os.path.join(out, f"rack-{i % 40:02d}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"gpu-{i:05d}.json"), "w", encoding="utf-8") as f:
            json.dump(r, f, indent=2)
    with open(os.path.join(out, "truncated.json"), "w", encoding="utf-8") as f:
        f.write('{"schema_version": 1, "layers": [')
    with open(os.path.join(out, "inventory.json"), "w", encoding="utf-8") as f:
        f.write('{"nodes": 1}')


def fleet_dir(binary, n, work):
    out = os.path.join(work, f"fleet-{n}")
    stamp = os.path.join(out, "inventory.json")
    newest = max(os.path.getmtime(__file__), os.path.getmtime(binary))
    if not os.path.exists(stamp) or os.path.getmtime(stamp) < newest:
        print(f"generating {out} ...", file=sys.stderr)
        generate(binary, n, out)
    return out


SAMPLE = re.compile(r'^(gpudoctor_[a-z_]+)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-z_]+)="((?:[^"\\]|\\.)*)"')


def series_of(prom_text):
    """(name, labels, value) of every sample of a Prometheus text exposition."""
    out = []
    for line in prom_text.splitlines():
        m = SAMPLE.match(line)
        if m:
            labels = dict(LABEL.findall(m.group(2) or ""))
            out.append((m.group(1), labels, m.group(3)))
    return out


def prometheus_answers(binary, root, n):
    """The API answers to the four queries of `fleet --prometheus` (src/fleet/prometheus/mod.rs)
    for `n` nodes, each the series of one of the fleet's reports (three kinds) with its own
    target, selected as Prometheus would: every series but check statuses and durations; check
    statuses that are not 0 (pass), and the XID check's; passes counted per check; and
    gpudoctor_info (last_over_time). A dict from a word of each query to its body."""
    kinds = {}
    for path in sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs
                       if f.startswith("gpu-")):
        i = int(os.path.basename(path)[4:9])
        kind = "rollout" if i % 10 < 6 else ("slow" if i % 97 == 5 else "healthy")
        if kind not in kinds:
            text = subprocess.run([binary, "render", path, "--format", "prometheus"],
                                  capture_output=True, text=True, check=True).stdout
            kinds[kind] = series_of(text)
        if len(kinds) == 3:
            break
    now = 1767225600.0
    every, checks, info = [], [], []
    passed = {}
    for i in range(n):
        kind = "rollout" if i % 10 < 6 else ("slow" if i % 97 == 5 else "healthy")
        target = {"job": "node-exporter", "instance": f"10.{i // 65536}.{i // 256 % 256}.{i % 256}:9100"}
        for name, labels, value in kinds[kind]:
            metric = dict(labels, **target, __name__=name)
            if name == "gpudoctor_info":
                metric["node"] = f"gpu-{i:05d}"
                info.append({"metric": {k: v for k, v in metric.items() if k != "__name__"},
                             "value": [now, value]})
            sample = {"metric": dict(sorted(metric.items())), "value": [now, value]}
            if name.endswith("_duration_seconds"):
                continue
            if name == "gpudoctor_check_status":
                if float(value) != 0 or labels["check"] == "driver.xid_events":
                    checks.append(sample)
                if float(value) == 0:
                    key = (labels["layer"], labels["check"])
                    passed[key] = passed.get(key, 0) + 1
                continue
            every.append(sample)
    counted = [{"metric": {"check": c, "layer": l}, "value": [now, str(k)]}
               for (l, c), k in sorted(passed.items())]
    wrap = lambda result: json.dumps({"status": "success",
                                      "data": {"resultType": "vector", "result": result}}).encode()
    return {"count": wrap(counted), "last_over_time": wrap(info), "%21%3D": wrap(checks),
            "": wrap(every)}


def serve(answers):
    """A loopback HTTP server answering /api/v1/query as Prometheus does; its URL."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = next(v for k, v in answers.items() if k in self.path)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def size_mib(root):
    total = 0
    for dirpath, _, names in os.walk(root):
        total += sum(os.path.getsize(os.path.join(dirpath, n)) for n in names)
    return total / (1 << 20)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--cpus", help="taskset CPU list for the measured command, e.g. 0,1")
    ap.add_argument("--binary", help="a built gpudoctor (default: cargo build --release)")
    ap.add_argument("--generate", type=int, metavar="N",
                    help="only write a fleet of N reports to --out, measure nothing")
    ap.add_argument("--out", help="where --generate writes (replaced)")
    args = ap.parse_args()
    runs = 5 if args.quick else args.runs
    binary = args.binary
    if binary is None:
        subprocess.run(["cargo", "build", "--release", "--locked"], cwd=REPO, check=True,
                       stdout=sys.stderr)
        binary = os.path.join(bench.target_dir(), "release", "gpudoctor")
    if args.generate:
        if not args.out:
            print("--generate needs --out DIR", file=sys.stderr)
            return 2
        generate(binary, args.generate, args.out)
        print(args.out)
        return 0
    work = os.path.join(bench.target_dir(), "bench")
    os.makedirs(work, exist_ok=True)

    sizes = [1000] if args.quick else [1000, 10000]
    rows = []
    for n in sizes:
        root = fleet_dir(binary, n, work)
        r = 3 if n > 1000 else runs
        for fmt in ("json", "table"):
            m = bench.measure(bench.pinned([binary, "fleet", root, "--format", fmt], args.cpus), r)
            rows.append((n, size_mib(root), fmt, m))
        out = subprocess.run([binary, "fleet", root, "--format", "json"], capture_output=True,
                             text=True)
        summary = json.loads(out.stdout)
        fleet_wide = [c["code"] for c in summary["checks"] if c["scope"] == "fleet_wide"]
        print(f"fleet-{n}: {summary['reports']} reports, {len(summary['skipped'])} skipped, "
              f"fleet-wide {fleet_wide}, {len(summary['outliers'])} outlier(s)",
              file=sys.stderr)
        answers = prometheus_answers(binary, root, n)
        server, url = serve(answers)
        m = bench.measure(bench.pinned([binary, "fleet", "--prometheus", url, "--format", "table"],
                                       args.cpus), r)
        rows.append((n, sum(map(len, answers.values())) / (1 << 20), "table --prometheus", m))
        server.shutdown()

    print(f"machine: {bench.machine()}")
    print(f"cpus: {args.cpus or 'all'}; {runs} runs (3 for 10 000), median wall\n")
    print("| reports | on disk (answer) | `fleet --format` | wall | peak RSS | exit | target |")
    print("|---|---|---|---|---|---|---|")
    for n, mib, fmt, m in rows:
        target = f"< {TARGET_MS:.0f} ms: {'met' if m['median_ms'] < TARGET_MS else 'MISSED'}"
        print(f"| {n} | {mib:.0f} MiB | {fmt} | {m['median_ms']:.1f} ms | "
              f"{m['max_rss_mib']:.1f} MiB | {m['exit']} | {target} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env bash
# gpu-node-probe.sh — run gpudoctor's active probes (--cuda, --bandwidth) once on a real GPU node
# and print what a reviewer needs: versions, how long NVML and CUDA take to open the GPUs with
# persistence mode as the node has it, every figure, every verdict, and a capture to replay
# anywhere.
#
#   scripts/gpu-node-probe.sh [--gpudoctor PATH] [--out DIR] [--perftest-dir DIR]
#                             [--cuda-timeout SECS] [--skip-gpudirect] [--reference]
#                             [-- GPUDOCTOR ARGS...]
#
# Arguments after `--` go to the live gpudoctor runs (`--root /host`, `--nvml-lib PATH`,
# `--cuda-lib PATH`, `--kernel-log FILE`); tests/active_probes.rs runs this script that way against
# the stand-in libcuda, NVML and ib_write_bw.
#
# It changes nothing on the node. It runs the probes once: `gpudoctor check --only driver`
# (NVML only: times nvmlInit and each GPU's handle), then `gpudoctor record --bandwidth` (the
# CUDA probe, its cuInit timed, and the GPUDirect loopbacks), then replays that capture as a
# table and as JSON, which costs nothing. It writes only under --out (default
# ./gpu-node-probe-<host>-<time>). With --reference it also runs NVIDIA's nvbandwidth and a
# plain `ib_write_bw` loopback without --use_cuda, when installed, to set gpudoctor's figures
# beside the tools the expectations come from (docs/checks.md "Active probes").
#
# Every GPU and HCA is busy while it records (about a minute on an 8-GPU, 8-HCA node): drain the
# node first (`kubectl drain NODE --ignore-daemonsets`). Needs bash 4.0 or later, coreutils
# `timeout` and python3 (for the summary; without it the JSON report is kept and printed raw).
#
# Exit status: gpudoctor's own for the replayed capture (0 healthy, 1 a layer failed, 3
# inconclusive, ...); 2 for a usage error of this script or a failed recording.

set -u -o pipefail

gpudoctor=""
out=""
perftest_dir=""
cuda_timeout=30
skip_gdr=0
reference=0

usage() {
    sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'
}

while [ $# -gt 0 ]; do
    case "$1" in
        --gpudoctor) gpudoctor="${2:?--gpudoctor needs a path}"; shift 2 ;;
        --out) out="${2:?--out needs a directory}"; shift 2 ;;
        --perftest-dir) perftest_dir="${2:?--perftest-dir needs a directory}"; shift 2 ;;
        --cuda-timeout) cuda_timeout="${2:?--cuda-timeout needs seconds}"; shift 2 ;;
        --skip-gpudirect) skip_gdr=1; shift ;;
        --reference) reference=1; shift ;;
        -h|--help) usage; exit 0 ;;
        --) shift; break ;;
        *) echo "gpu-node-probe.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
    esac
done

case "$cuda_timeout" in
    ''|*[!0-9]*) echo "gpu-node-probe.sh: --cuda-timeout takes whole seconds" >&2; exit 2 ;;
esac

# The binary: --gpudoctor, else this checkout's release or debug build, else PATH.
here="$(cd "$(dirname "$0")/.." && pwd)"
if [ -z "$gpudoctor" ]; then
    for candidate in "$here/target/release/gpudoctor" "$here/target/debug/gpudoctor"; do
        if [ -x "$candidate" ]; then gpudoctor="$candidate"; break; fi
    done
fi
if [ -z "$gpudoctor" ]; then
    gpudoctor="$(command -v gpudoctor || true)"
fi
if [ -z "$gpudoctor" ] || [ ! -x "$gpudoctor" ]; then
    echo "gpu-node-probe.sh: no gpudoctor binary: build one (cargo build --release) or pass --gpudoctor PATH" >&2
    exit 2
fi

host="$(hostname 2>/dev/null || echo node)"
out="${out:-./gpu-node-probe-$host-$(date -u +%Y%m%dT%H%M%SZ)}"
if [ -e "$out" ]; then
    echo "gpu-node-probe.sh: $out exists; pass another --out" >&2
    exit 2
fi
mkdir -p "$out" || exit 2

# The timeout this script gives each gpudoctor run: gpudoctor bounds itself (docs/performance.md
# "Time budget": 4 x (cuda-timeout + 6 s) for the CUDA probe, cuInit one cuda-timeout more per
# 8 GPUs, cuda-timeout + 6 s per HCA port), this is a backstop against a gpudoctor bug, generous
# enough never to cut a healthy run.
backstop=$(( 4 * (cuda_timeout + 6) + 2 * cuda_timeout + 64 * (cuda_timeout + 6) + 120 ))

# Arrays are expanded as ${a[@]+"${a[@]}"}: bash before 4.4 calls an empty "${a[@]}" unbound
# under `set -u`.
live_args=("$@")
probe_args=(--cuda-timeout "$cuda_timeout")
if [ -n "$perftest_dir" ]; then probe_args+=(--perftest-dir "$perftest_dir"); fi
replay_args=()
if [ "$skip_gdr" = 1 ]; then replay_args+=(--skip rdma); fi
# The NVML-only run takes the live arguments but those of the active probes (gpudoctor refuses
# --cuda-lib without --cuda or --bandwidth).
nvml_args=()
skip_next=0
for arg in ${live_args[@]+"${live_args[@]}"}; do
    if [ "$skip_next" = 1 ]; then skip_next=0; continue; fi
    case "$arg" in
        --cuda-lib|--perftest-dir) skip_next=1 ;;
        --cuda-lib=*|--perftest-dir=*) ;;
        *) nvml_args+=("$arg") ;;
    esac
done

section() { printf '\n== %s ==\n' "$1"; }
# `run NAME CMD...`: CMD's stdout to $out/NAME.out, stderr to $out/NAME.err, its wall time and
# exit status to $out/NAME.time; echoes the status.
run() {
    local name="$1"; shift
    local start end rc
    start=$(date +%s.%N)
    timeout --kill-after=10 "$backstop" "$@" >"$out/$name.out" 2>"$out/$name.err"
    rc=$?
    end=$(date +%s.%N)
    printf '%s %s\n' "$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')" "$rc" >"$out/$name.time"
    return "$rc"
}
took() { awk '{ printf "%s s, exit %s", $1, $2 }' "$out/$1.time"; }

# Found here, not inside the versions block below: that block runs in a subshell (its output
# goes through tee), and the reference loopback needs the path too.
ibwb="$(command -v ib_write_bw 2>/dev/null || true)"
if [ -n "$perftest_dir" ] && [ -x "$perftest_dir/ib_write_bw" ]; then ibwb="$perftest_dir/ib_write_bw"; fi

section "versions"
{
    echo "gpudoctor:      $("$gpudoctor" --version 2>&1 | head -n1) ($gpudoctor)"
    echo "kernel:         $(uname -r)"
    if [ -r /proc/driver/nvidia/version ]; then
        echo "nvidia module:  $(head -n1 /proc/driver/nvidia/version)"
    else
        echo "nvidia module:  /proc/driver/nvidia/version not readable"
    fi
    if command -v nvidia-smi >/dev/null 2>&1; then
        echo "nvidia-smi:     $(timeout 20 nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>&1 | head -n1)"
        echo "cuda (driver):  $(timeout 20 nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -n1)"
        echo "gpus:"
        timeout 20 nvidia-smi --query-gpu=index,name,pci.bus_id,pcie.link.gen.max,pcie.link.width.current,persistence_mode,compute_mode \
            --format=csv,noheader 2>&1 | sed 's/^/  /'
    else
        echo "nvidia-smi:     not installed"
    fi
    echo "libcuda:        $( (ldconfig -p 2>/dev/null | grep -m1 'libcuda.so.1 ' | sed 's/.*=> //') || true)"
    if [ -n "$ibwb" ]; then
        # Bounded: a perftest that does not know --version may start a server and wait.
        echo "ib_write_bw:    $(timeout 20 "$ibwb" --version 2>&1 | head -n1) ($ibwb)"
    else
        echo "ib_write_bw:    not found (the GPUDirect loopbacks will skip: install perftest)"
    fi
    if command -v ibv_devinfo >/dev/null 2>&1; then
        echo "rdma ports:"
        for port in /sys/class/infiniband/*/ports/*; do
            [ -r "$port/rate" ] || continue
            dev="${port#/sys/class/infiniband/}"; dev="${dev%%/*}"
            printf '  %s port %s: %s, %s\n' "$dev" "${port##*/}" "$(cat "$port/state" 2>/dev/null)" "$(cat "$port/rate" 2>/dev/null)"
        done
    fi
    echo "nvidia_peermem: $(grep -q '^nvidia_peermem ' /proc/modules 2>/dev/null && echo loaded || echo 'not loaded')"
} | tee "$out/versions.txt"

section "1. opening the GPUs: nvmlInit and each handle (NVML only, persistence mode as found)"
run nvml "$gpudoctor" check --only driver --keep-going --format json ${nvml_args[@]+"${nvml_args[@]}"}
echo "took $(took nvml)"
if command -v python3 >/dev/null 2>&1; then
    python3 - "$out/nvml.out" <<'EOF' || cat "$out/nvml.out"
import json, sys

with open(sys.argv[1]) as f:
    report = json.load(f)
checks = {c["code"]: c for layer in report.get("layers", []) for c in layer.get("checks", [])}
for code in ("driver.nvml_init", "driver.persistence_mode", "driver.gpu_count"):
    c = checks.get(code)
    if c is None:
        continue
    print(f"{code}: {c.get('status')} - {c.get('summary', '')}")
    for ev in c.get("evidence", []):
        if ev.get("source") == "nvml timing (this run)":
            print(f"  {ev.get('observed', '')}")
EOF
else
    cat "$out/nvml.out"
fi

section "2. gpudoctor record --bandwidth: the probes, run once"
run record "$gpudoctor" record --bandwidth --out "$out/capture.tar.gz" "${probe_args[@]}" ${live_args[@]+"${live_args[@]}"}
record_status=$?
echo "took $(took record)"
echo "progress (stderr):"
sed 's/^/  /' "$out/record.err"
if [ ! -f "$out/capture.tar.gz" ]; then
    echo "gpu-node-probe.sh: the recording failed (exit $record_status); see $out/record.err" >&2
    exit 2
fi

section "3. the capture replayed (table)"
run replay "$gpudoctor" check --root "$out/capture.tar.gz" --keep-going ${replay_args[@]+"${replay_args[@]}"}
cat "$out/replay.out"

section "4. the same as JSON: every active-probe figure and verdict"
run report "$gpudoctor" check --root "$out/capture.tar.gz" --keep-going --format json ${replay_args[@]+"${replay_args[@]}"}
status=$?
if command -v python3 >/dev/null 2>&1; then
    python3 - "$out/report.out" "$out/report.json" "$out/capture.tar.gz" <<'EOF' || cat "$out/report.out"
import json, sys, tarfile

with open(sys.argv[1]) as f:
    report = json.load(f)
with open(sys.argv[2], "w") as f:
    json.dump(report, f, indent=2)
# cuInit's time, as the recording's CUDA probe measured it.
try:
    with tarfile.open(sys.argv[3]) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith(".gpudoctor/cuda.json"))
        cuda = json.load(tar.extractfile(member))
    init_us = cuda.get("init_us")
    if init_us is not None:
        print(f"cuInit took {init_us / 1e6:.2f} s on {cuda.get('device_count', '?')} gpu(s)")
except Exception as err:  # a capture without the probe's file: say so, go on
    print(f"cuInit time not found in the capture ({err})")
active = {"driver.cuda", "topology.host_bandwidth", "nvlink.p2p_bandwidth", "rdma.gpudirect_bandwidth"}
node = report.get("node") or {}
print(f"node {node.get('hostname', '?')}, driver {node.get('driver_version', '?')}, profile {report.get('profile') or '-'}")
for layer in report.get("layers", []):
    print(f"{layer.get('id', '?'):<14} {layer.get('status', '?'):<8} {layer.get('duration_ms', '?')} ms")
for layer in report.get("layers", []):
    for check in layer.get("checks", []):
        if check.get("code") not in active:
            continue
        print(f"\n{check['code']}: {check.get('status')} - {check.get('summary', '')}")
        for ev in check.get("evidence", [])[:20]:
            exp = f" (expected {ev['expected']})" if ev.get("expected") else ""
            print(f"  evidence {ev.get('source', '')}: {ev.get('observed', '')}{exp}")
        for fig in check.get("figures", []):
            labels = ",".join(f"{k}={v}" for k, v in sorted(fig.get("labels", {}).items()))
            value = fig.get("value", 0)
            unit = ""
            if fig.get("name", "").endswith("_bytes_per_second"):
                value, unit = value / 1e9, " GB/s"
            print(f"  {fig.get('name')}{{{labels}}} = {value:.2f}{unit}")
        if check.get("hint"):
            print(f"  hint: {check['hint']}")
first = report.get("first_failure") or {}
print(f"\nexit status {report.get('exit_code', '?')}, first failure {first.get('layer', '-')} ({first.get('code', '-')})")
EOF
else
    cat "$out/report.out"
fi
echo "replay it anywhere with: gpudoctor check --root $out/capture.tar.gz --keep-going"

if [ "$reference" = 1 ]; then
    section "5. reference tools"
    if command -v nvbandwidth >/dev/null 2>&1; then
        run nvbandwidth nvbandwidth -t host_to_device_memcpy_ce device_to_host_memcpy_ce device_to_device_memcpy_read_ce
        echo "nvbandwidth took $(took nvbandwidth)"
        cat "$out/nvbandwidth.out"
    else
        echo "nvbandwidth not installed (https://github.com/NVIDIA/nvbandwidth)"
    fi
    if [ -n "$ibwb" ] && [ "$skip_gdr" = 0 ]; then
        for port in /sys/class/infiniband/*/ports/1; do
            [ -r "$port/state" ] && grep -q ACTIVE "$port/state" || continue
            dev="${port#/sys/class/infiniband/}"; dev="${dev%%/*}"
            # Host memory, no --use_cuda: tells the NIC from the GPU path (docs/rdma.md).
            timeout 60 "$ibwb" -d "$dev" -i 1 -p 18999 -s 8388608 -F --report_gbits >"$out/ibwb-$dev.server" 2>&1 &
            server=$!
            sleep 2
            timeout 60 "$ibwb" -d "$dev" -i 1 -p 18999 -s 8388608 -F --report_gbits localhost >"$out/ibwb-$dev.client" 2>&1
            wait "$server" 2>/dev/null
            echo "$dev host memory: $(grep -E '^ *8388608 ' "$out/ibwb-$dev.client" | awk '{ print $4 " Gb/s average" }')"
        done
    fi
fi

section "files"
ls -l "$out"
exit "$status"

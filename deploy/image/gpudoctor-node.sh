#!/bin/sh
# gpudoctor-node: run `gpudoctor check` against the host mounted at $GPUDOCTOR_ROOT (default
# /host) the way the manifests in deploy/ need it. Modes:
#   loop  (DaemonSet)  check every $GPUDOCTOR_INTERVAL seconds, forever; table to the log,
#                      Prometheus textfile and the JSON report to the directories given
#   once  (Job)        one check; the report to the log; exits with gpudoctor's exit code
#   npd   (NPD plugin) one check in node-problem-detector mode: exit 0/1/2, one line on stdout
# Extra arguments are passed to `gpudoctor check` as they are (e.g. --format markdown).
#
# Environment:
#   GPUDOCTOR_ROOT          host root inside the container (default /host)
#   GPUDOCTOR_INTERVAL      seconds between runs in loop mode (default 300)
#   GPUDOCTOR_TEXTFILE_DIR  node_exporter textfile directory (loop/npd; empty: none)
#   GPUDOCTOR_REPORT        where to save the last JSON report (empty: nowhere)
#   GPUDOCTOR_NVML_LIB      the host's libnvidia-ml.so.1 as seen in the container, passed as
#                           --nvml-lib (default: none, gpudoctor finds it under the root)
#   GPUDOCTOR_ARGS          more `gpudoctor check` arguments (default: --skip nccl, because a
#                           periodic NCCL run would take the node's GPUs from its workloads)
#   GPUDOCTOR_BIN           the gpudoctor binary (default: next to this script, else PATH)
set -u

mode=${1:-loop}
[ $# -gt 0 ] && shift

root=${GPUDOCTOR_ROOT:-/host}
interval=${GPUDOCTOR_INTERVAL:-300}
here=$(dirname "$0")
if [ -n "${GPUDOCTOR_BIN:-}" ]; then
    bin=$GPUDOCTOR_BIN
elif [ -x "$here/gpudoctor" ]; then
    bin=$here/gpudoctor
else
    bin=gpudoctor
fi

# NVML: gpudoctor itself loads the host's libnvidia-ml.so.1 from under the root (the GPU
# Operator's driver root first, then the distribution paths; docs/deploy.md). Set
# GPUDOCTOR_NVML_LIB only where the host keeps it elsewhere.
nvml=${GPUDOCTOR_NVML_LIB:-}

# Assemble `gpudoctor check ...` in the positional parameters (POSIX sh has no arrays).
user_args=$(printf '%s\n' "$@")
set -- check --root "$root"
[ -n "$nvml" ] && set -- "$@" --nvml-lib "$nvml"
# Word splitting of GPUDOCTOR_ARGS is intended: it holds several flags.
# shellcheck disable=SC2086
set -- "$@" ${GPUDOCTOR_ARGS---skip nccl}
if [ "$mode" != once ]; then
    [ -n "${GPUDOCTOR_TEXTFILE_DIR:-}" ] && set -- "$@" --textfile-dir "$GPUDOCTOR_TEXTFILE_DIR"
fi
[ -n "${GPUDOCTOR_REPORT:-}" ] && set -- "$@" --save-report "$GPUDOCTOR_REPORT"
old_ifs=$IFS
IFS='
'
# shellcheck disable=SC2086
[ -n "$user_args" ] && set -- "$@" $user_args
IFS=$old_ifs

case "$mode" in
    npd)
        exec "$bin" "$@" --npd
        ;;
    once)
        exec "$bin" "$@"
        ;;
    loop)
        trap 'exit 0' TERM INT
        while :; do
            "$bin" "$@"
            echo "gpudoctor-node: exit $?; next run in ${interval}s" >&2
            sleep "$interval" &
            wait $!
        done
        ;;
    *)
        echo "gpudoctor-node: unknown mode '$mode' (loop, once, npd)" >&2
        exit 2
        ;;
esac

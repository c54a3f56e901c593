#!/bin/sh
# gpudoctor-node: run `gpudoctor check` against the host mounted at $GPUDOCTOR_ROOT (default
# /host) the way the manifests in deploy/ need it. Modes:
#   loop  (DaemonSet)  check every $GPUDOCTOR_INTERVAL seconds, forever; to the log the first
#                      report, then only what changed (with GPUDOCTOR_REPORT) and a line a run;
#                      Prometheus textfile and the JSON report to the directories given
#   once  (Job)        one check; the report to the log; exits with gpudoctor's exit code
#   npd [CONDITION]    (NPD plugin) one check in node-problem-detector mode: exit 0/1/2, one
#                      line on stdout; with a CONDITION (gpu-hardware, gpu-driver, ...), the
#                      answer for that node condition only (docs/deploy.md)
#   npd-saved CONDITION (NPD plugin) the answer for CONDITION from the report the `npd` rule
#                      saved to GPUDOCTOR_REPORT: one check per interval serves every condition
# Extra arguments are passed to `gpudoctor check` as they are (e.g. --format markdown).
#
# Environment:
#   GPUDOCTOR_ROOT          host root inside the container (default /host)
#   GPUDOCTOR_INTERVAL      seconds between runs in loop mode (default 300)
#   GPUDOCTOR_TEXTFILE_DIR  node_exporter textfile directory (loop/npd; empty: none)
#   GPUDOCTOR_REPORT        where to save the last JSON report (empty: nowhere; npd-saved
#                           reads it; loop mode keeps the one before as REPORT.previous and
#                           logs only what changed between them)
#   GPUDOCTOR_NPD_MAX_AGE   seconds after which npd-saved calls the saved report stale and
#                           answers unknown (default 900: three NPD intervals of 300 s)
#   GPUDOCTOR_NVML_LIB      the host's libnvidia-ml.so.1 as seen in the container, passed as
#                           --nvml-lib (default: none, gpudoctor finds it under the root)
#   GPUDOCTOR_ARGS          more `gpudoctor check` arguments (default: --skip nccl, because a
#                           periodic NCCL run would take the node's GPUs from its workloads)
#   GPUDOCTOR_BIN           the gpudoctor binary (default: next to this script, else PATH)
#   GPUDOCTOR_PROFILE_DIR   where the gpudoctor-profile ConfigMap is mounted (default
#                           /etc/gpudoctor/profile): `profile.toml` (a profile file) or `name`
#                           (a built-in) becomes --profile
set -u

mode=${1:-loop}
[ $# -gt 0 ] && shift
condition=
case "$mode" in
    npd | npd-saved)
        case "${1:-}" in
            '' | -*) ;;
            *) condition=$1; shift ;;
        esac
        ;;
esac

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

if [ "$mode" = npd-saved ]; then
    if [ -z "$condition" ] || [ -z "${GPUDOCTOR_REPORT:-}" ]; then
        echo "gpudoctor-node: npd-saved needs a condition and GPUDOCTOR_REPORT"
        exit 2
    fi
    exec "$bin" render "$GPUDOCTOR_REPORT" --npd-condition "$condition" \
        --max-age "${GPUDOCTOR_NPD_MAX_AGE:-900}" "$@"
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
# The profile from the gpudoctor-profile ConfigMap: a profile file wins over a built-in name;
# both empty (or no ConfigMap): gpudoctor chooses one from the GPUs.
profile_dir=${GPUDOCTOR_PROFILE_DIR:-/etc/gpudoctor/profile}
profile=
if [ -s "$profile_dir/profile.toml" ]; then
    profile=$profile_dir/profile.toml
elif [ -s "$profile_dir/name" ]; then
    profile=$(tr -d ' \t\r\n' < "$profile_dir/name")
fi
[ -n "$profile" ] && set -- "$@" --profile "$profile"
old_ifs=$IFS
IFS='
'
# shellcheck disable=SC2086
[ -n "$user_args" ] && set -- "$@" $user_args
IFS=$old_ifs

case "$mode" in
    npd)
        if [ -n "$condition" ]; then
            exec "$bin" "$@" --npd --npd-condition "$condition"
        fi
        exec "$bin" "$@" --npd
        ;;
    once)
        exec "$bin" "$@"
        ;;
    loop)
        # The log says what changed, not the same table every five minutes: the first run's
        # report in full, then `gpudoctor diff` of each run against the one before when
        # anything that matters changed, and one line per run on stderr. Needs
        # GPUDOCTOR_REPORT (the DaemonSet sets it); without it every run prints its table.
        trap 'exit 0' TERM INT
        report=${GPUDOCTOR_REPORT:-}
        previous=$report.previous
        [ -n "$report" ] && rm -f "$previous"
        while :; do
            if [ -n "$report" ]; then
                "$bin" "$@" > /dev/null
                code=$?
                if [ ! -s "$previous" ]; then
                    "$bin" render "$report"
                else
                    changes=$("$bin" diff "$previous" "$report")
                    [ $? -eq 1 ] && printf '%s\n' "$changes"
                fi
                [ -s "$report" ] && cp "$report" "$previous"
            else
                "$bin" "$@"
                code=$?
            fi
            echo "gpudoctor-node: $(date -u +%Y-%m-%dT%H:%M:%SZ) exit $code; next run in ${interval}s" >&2
            sleep "$interval" &
            wait $!
        done
        ;;
    *)
        echo "gpudoctor-node: unknown mode '$mode' (loop, once, npd, npd-saved)" >&2
        exit 2
        ;;
esac

//! Which NVML error kinds give which status, per NVML-fed check: the policy the checks apply
//! (`gpu_health::PerGpu`, `driver.gpu_count`, `driver.nvml_init`) written out for
//! docs/checks.md and `gpudoctor explain`. Kinds are the `nvmlReturn_t` names of
//! `answers::nvml::NvmlErrorKind` as `nvml.json` records them.

/// What every per-GPU reading check does with a reading's answer.
const PER_READING: &str = "`not_supported` is not judged (skip when no GPU is judged); `gpu_is_lost` leaves the GPU to driver.gpu_count (fail there); a handle error (`no_permission`, `timeout`, ...) leaves the GPU out; any other kind on a reading (`no_permission`, `operating_system`, `timeout`, `unknown`, ...) is `error` naming GPU, field and kind, unless another GPU fails or warns (that status stands, the unread reading appended)";

/// The NVML error policy of `code`, or `None` for a check NVML does not feed.
pub fn policy(code: &str) -> Option<&'static str> {
    Some(match code {
        "driver.nvml_init" => {
            "on init: `library_not_found`, `driver_not_loaded`, `lib_rm_version_mismatch`, `gpu_is_lost`, `reset_required`, `insufficient_power`, `corrupted_inforom`, `irq_issue` fail; `no_permission`, `operating_system`, `timeout` (NVML's or gpudoctor's budget) and every other kind are `error`; a capture without nvml.json (`not_recorded`) or with one that does not parse (`unreadable`) is `error`"
        }
        "driver.gpu_count" => {
            "a handle refused with `no_permission`/`operating_system` (device cgroup, unprivileged container) or not answered within the per-GPU budget (`timeout`) is `error` naming the GPU and the cause, never \"fallen off the bus\"; a handle failing with any other kind (`gpu_is_lost`, `reset_required`, `unknown`, ...) fails; `gpu_is_lost` from any reading after the handle fails naming the GPU and the reading; a GPU on PCI without an NVML device fails unless a refused or unanswered handle accounts for it"
        }
        "driver.persistence_mode" => {
            "`not_supported` or an error on the reading: not judged (skip when no server GPU reports it); GPUs whose handle failed are left to driver.gpu_count"
        }
        "driver.ecc_errors"
        | "driver.retired_pages"
        | "driver.thermal"
        | "driver.clock_slowdown"
        | "driver.mig_pending"
        | "nvlink.links_active"
        | "nvlink.error_counters"
        | "nvlink.fabric_state" => PER_READING,
        "driver.row_remap" => {
            "as every per-GPU reading check (`not_supported` not judged, `gpu_is_lost` left to driver.gpu_count, other kinds `error`), and `not_supported` on a GPU with MIG on (nvml.h: not supported while MIG is on; the field values did not answer either) is said plainly as not readable under MIG, never as a pre-Ampere GPU"
        }
        "driver.pcie_link" => {
            "as every per-GPU reading check for the link widths (`not_supported` not judged, `gpu_is_lost` left to driver.gpu_count, other kinds `error`); utilisation `not_supported` (MIG on) or an error is unknown, never idle: a generation below max is then noted, not judged"
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_nvml_fed_check_has_a_policy_and_every_policy_a_check() {
        let codes: Vec<&str> = crate::checks::registry().iter().map(|c| c.code).collect();
        for code in [
            "driver.nvml_init",
            "driver.gpu_count",
            "driver.persistence_mode",
            "driver.ecc_errors",
            "driver.retired_pages",
            "driver.row_remap",
            "driver.thermal",
            "driver.clock_slowdown",
            "driver.pcie_link",
            "driver.mig_pending",
            "nvlink.links_active",
            "nvlink.error_counters",
            "nvlink.fabric_state",
        ] {
            assert!(codes.contains(&code), "{code} is not registered");
            assert!(policy(code).is_some(), "{code} has no nvml error policy");
        }
        assert!(policy("toolkit.runtime_config").is_none());
    }
}

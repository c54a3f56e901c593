//! ConnectX (mlx5) events in the kernel log: a NIC that never came up, firmware that stopped
//! answering, a cable module running hot or a slot without the power the card needs, and a port
//! whose link keeps going up and down. The lines come from `drivers/net/ethernet/mellanox/mlx5/
//! core/` (`main.c` `probe_one`/`mlx5_load_one`, `health.c` `poll_health`/`print_health_info`,
//! `events.c` `port_module_event`/`pcie_core`, `en_main.c` link state) and the PCI core's
//! `probe of <bdf> failed with error` (`drivers/base/dd.c`). Real lines: tests/data/kernel/
//! (`mlx5-*`, README names each source); gpud and Azure's health checks read the same shapes.

use serde::Serialize;

use super::events::device_prefix;
use super::lines::take_bdf;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NicEventKind {
    /// `mlx5_core: probe of 0000:03:00.0 failed with error -22`, `mlx5_load_one failed with
    /// error code -22`, `mlx5_init_one failed with error code ...`: the NIC is not usable.
    ProbeFailed,
    /// `device's health compromised - reached miss count`, `Health issue observed, firmware
    /// internal error`: the firmware stopped; the driver will reset or give up on the NIC.
    HealthCompromised,
    /// `Port module event[error]: module 0, Cable error, High Temperature`.
    ModuleHot,
    /// `Detected insufficient power on the PCIe slot (27W).`
    SlotPower,
    /// `wait_func:1132:(pid 141181): CREATE_DCT(0x710) timeout. Will cause a leak of a command
    /// resource`, `… No done completion`: the firmware did not answer a command (cmd.c
    /// `wait_func`, `wait_func_handle_exec_timeout`), a device fault whichever process sent it.
    /// Not a command the firmware answered with an error (`mlx5_cmd_check … status bad
    /// parameter`, `mlx5_cmd_out_err … limits exceeded`): that is the caller's request refused,
    /// not the device failing, and is not read.
    CommandTimeout,
    /// `mlx5_core <bdf> <netdev>: Link down` / `Link up`.
    LinkDown,
    LinkUp,
}

/// One such line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NicEvent {
    pub kind: NicEventKind,
    /// The PCI function: "0000:03:00.0".
    pub device: String,
    /// What the line adds: the error code, the module, the netdev.
    pub detail: String,
    pub line_number: usize,
    pub boot: u32,
    pub stamp: Option<super::Stamp>,
    /// The line, prefix removed.
    pub message: String,
}

/// Drivers whose lines are read here.
fn is_mlx(driver: &str) -> bool {
    matches!(driver, "mlx5_core" | "mlx4_core")
}

/// What one message (prefix removed) says about a NIC: kind, device, detail.
pub(super) fn nic_event(message: &str) -> Option<(NicEventKind, String, String)> {
    let t = message.trim();
    // The driver core's line has no device prefix: `mlx5_core: probe of <bdf> failed ...`.
    if let Some(rest) = t
        .strip_prefix("mlx5_core: probe of ")
        .or_else(|| t.strip_prefix("mlx4_core: probe of "))
    {
        let (bdf, rest) = take_bdf(rest)?;
        let code = rest.trim().strip_prefix("failed with error ")?;
        return Some((
            NicEventKind::ProbeFailed,
            bdf,
            format!("probe failed with error {code}"),
        ));
    }
    let (driver, after) = t.split_once(' ')?;
    if !is_mlx(driver) {
        return without_address(t);
    }
    // `mlx5_core 0000:01:00.1 eth1: Link up`: the netdev follows the address, before the colon.
    if let Some((bdf, _)) = take_bdf(after)
        && let Some((netdev, state)) = link_state(t, &bdf)
    {
        return Some((state, bdf, netdev));
    }
    let Some((_, bdf, rest)) = device_prefix(t) else {
        return without_address(t);
    };
    let rest = rest.trim();
    // `poll_health:801:(pid 0): ...`: the function:line:(pid) prefix of mlx5_core_err and kin.
    let body = strip_call_site(rest);
    if let Some(code) = body
        .strip_prefix("mlx5_load_one failed with error code ")
        .or_else(|| body.strip_prefix("mlx5_init_one failed with error code "))
        .or_else(|| body.strip_prefix("init_one failed with error code "))
    {
        let what = body.split(" failed").next().unwrap_or("load");
        return Some((
            NicEventKind::ProbeFailed,
            bdf,
            format!("{what} failed with error code {}", code.trim()),
        ));
    }
    if body.starts_with("device's health compromised")
        || body.starts_with("Health issue observed")
        || body.contains("firmware internal error")
    {
        return Some((NicEventKind::HealthCompromised, bdf, body.to_string()));
    }
    if let Some(command) = command_timeout(body) {
        return Some((NicEventKind::CommandTimeout, bdf, command));
    }
    module_or_power(body).map(|(kind, detail)| (kind, bdf, detail))
}

/// The command of a firmware command timeout: `CREATE_DCT(0x710) timeout. Will cause a leak of a
/// command resource` (cmd.c `wait_func`), `cmd[22]: CREATE_DCT(0x710) No done completion`
/// (`wait_func_handle_exec_timeout`), `cmd[0]: TEARDOWN_HCA(0x103) Async, timeout …`.
fn command_timeout(body: &str) -> Option<String> {
    let timed_out = body.contains(" timeout. Will cause a leak of a command resource")
        || body.ends_with(" No done completion")
        || (body.starts_with("cmd[") && body.contains("timeout"));
    if !timed_out {
        return None;
    }
    let body = match body.split_once("]: ") {
        Some((cmd, rest)) if cmd.starts_with("cmd[") => rest,
        _ => body,
    };
    let command = body.split(['(', ' ']).next().filter(|c| {
        !c.is_empty()
            && c.bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
    })?;
    Some(format!("{command} command timed out"))
}

/// A hot module or a slot without the card's power, from the message after its call site.
fn module_or_power(body: &str) -> Option<(NicEventKind, String)> {
    if body.starts_with("Port module event") && body.contains("High Temperature") {
        let module = body
            .split(": module ")
            .nth(1)
            .and_then(|m| m.split(',').next())
            .unwrap_or("?");
        return Some((NicEventKind::ModuleHot, format!("module {module}")));
    }
    if body.starts_with("Detected insufficient power on the PCIe slot") {
        let watts = body
            .split_once('(')
            .and_then(|(_, w)| w.split_once(')'))
            .map(|(w, _)| w.to_string())
            .unwrap_or_default();
        return Some((NicEventKind::SlotPower, format!("slot gives {watts}")));
    }
    None
}

/// The same lines as people paste them, the address cut away: `mlx5_core: Port module
/// event[error]: ...`, `mlx5_pcie_event: Detected insufficient power ...` (the driver's name cut
/// too), `mlx5_core enp1s0f0np0: Link down` (the netdev without the address). Read with device
/// `""`: the check names them as an mlx5 NIC whose line gives no PCI address. Probe failures and
/// health faults are not read this way: without the address they name no NIC to act on.
fn without_address(t: &str) -> Option<(NicEventKind, String, String)> {
    if let Some(rest) = t.strip_prefix("mlx5_core: ") {
        let (kind, detail) = module_or_power(strip_call_site(rest.trim()))?;
        return Some((kind, String::new(), detail));
    }
    if t.starts_with("mlx5_pcie_event:") || t.starts_with("mlx5_port_module_event:") {
        let body = if t.contains("(pid ") {
            strip_call_site(t)
        } else {
            t.split_once(": ").map_or(t, |(_, b)| b)
        };
        let (kind, detail) = module_or_power(body.trim())?;
        return Some((kind, String::new(), detail));
    }
    let rest = t.strip_prefix("mlx5_core ")?;
    let (netdev, state) = rest.split_once(": ")?;
    if netdev.is_empty() || netdev.contains([' ', ':']) || netdev.len() > 32 {
        return None;
    }
    let kind = match state.trim() {
        "Link up" => NicEventKind::LinkUp,
        "Link down" => NicEventKind::LinkDown,
        _ => return None,
    };
    Some((kind, String::new(), netdev.to_string()))
}

/// `<driver> <bdf> <netdev>: Link up|down` -> (netdev, state).
fn link_state(message: &str, bdf: &str) -> Option<(String, NicEventKind)> {
    let at = message.find(bdf)?;
    let after = message[at + bdf.len()..].strip_prefix(' ')?;
    let (netdev, state) = after.split_once(": ")?;
    if netdev.is_empty() || netdev.contains(' ') || netdev.len() > 32 {
        return None;
    }
    let kind = match state.trim() {
        "Link up" => NicEventKind::LinkUp,
        "Link down" => NicEventKind::LinkDown,
        _ => return None,
    };
    Some((netdev.to_string(), kind))
}

/// `poll_health:801:(pid 0): text` -> `text`; a line without the call site as it is. Some
/// kernels repeat the address first (`0000:03:00.0:handle_hca_cap:438:(pid 6016): ...`).
fn strip_call_site(rest: &str) -> &str {
    match rest.find("(pid ") {
        Some(at) if rest[..at].ends_with(':') && !rest[..at].contains(' ') => {
            rest[at..].split_once("): ").map(|(_, t)| t).unwrap_or(rest)
        }
        _ => rest,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(name: &str) -> Vec<(NicEventKind, String, String)> {
        let text = std::fs::read_to_string(format!(
            "{}/tests/data/kernel/{name}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        text.lines()
            .filter_map(|l| nic_event(super::super::split_line(l).1))
            .collect()
    }

    #[test]
    fn real_probe_failures() {
        for (file, bdf) in [
            ("mlx5-probe-fail-tinycore-redpill-9.txt", "0000:03:00.0"),
            ("mlx5-probe-fail-rp-ext-129.txt", "0000:01:00.0"),
        ] {
            let e = events(file);
            assert_eq!(
                e,
                vec![
                    (
                        NicEventKind::ProbeFailed,
                        bdf.to_string(),
                        "mlx5_load_one failed with error code -22".to_string()
                    ),
                    (
                        NicEventKind::ProbeFailed,
                        bdf.to_string(),
                        "probe failed with error -22".to_string()
                    ),
                ],
                "{file}"
            );
        }
    }

    #[test]
    fn real_health_and_link_lines() {
        let e = events("mlx5-health-fw-internal-error-qemu-devel-2025-03-18.txt");
        assert!(
            e.iter()
                .all(|(k, _, _)| *k == NicEventKind::HealthCompromised)
        );
        let devices: std::collections::BTreeSet<&str> =
            e.iter().map(|(_, d, _)| d.as_str()).collect();
        assert!(devices.contains("0000:0d:00.0"), "{devices:?}");
        let e = events("mlx5-link-up-repeated-journal-cubecos-733.txt");
        assert!(e.len() >= 4);
        assert!(
            e.iter()
                .all(|(k, d, n)| *k == NicEventKind::LinkUp && d == "0000:01:00.1" && n == "eth1")
        );
        // Cable plugged/unplugged is not a fault.
        assert!(events("mlx5-port-module-cable-unplugged-gpud-pstore.txt").is_empty());
        assert!(events("mlx5-port-module-plugged-arm-nas-16.txt").is_empty());
    }

    /// The hot module and slot power lines as people paste them, address (and driver) cut
    /// (tests/data/kernel/README.md): read, with no device.
    #[test]
    fn real_lines_without_their_address() {
        assert_eq!(
            events("mlx5-port-module-hot-no-address-gx10-writeup.txt"),
            vec![
                (NicEventKind::ModuleHot, String::new(), "module 0".into()),
                (NicEventKind::LinkDown, String::new(), "enp1s0f0np0".into()),
            ]
        );
        assert_eq!(
            events("mlx5-slot-power-no-driver-prefix-dgx-spark-notes.txt"),
            vec![(
                NicEventKind::SlotPower,
                String::new(),
                "slot gives 27W".into()
            )]
        );
        // Probe failures need their address; other drivers' lines are not read.
        assert_eq!(
            nic_event("mlx5_core: mlx5_load_one failed with error code -22"),
            None
        );
        assert_eq!(nic_event("e1000e eno1: Link down"), None);
        assert_eq!(nic_event("mlx5_core 0000:5c:00.0: Link down"), None);
    }

    /// The two shapes gpud quotes with their prefix elided (tests/data/kernel/README.md), put
    /// behind the `mlx5_core <bdf>: ` prefix every other mlx5 line has.
    #[test]
    fn module_temperature_and_slot_power() {
        let hot = "mlx5_core 0000:5c:00.0: mlx5_port_module_event:1131:(pid 0): Port module event[error]: module 0, Cable error, High Temperature";
        assert_eq!(
            nic_event(hot),
            Some((
                NicEventKind::ModuleHot,
                "0000:5c:00.0".into(),
                "module 0".into()
            ))
        );
        let power = "mlx5_core 0000:5c:00.0: mlx5_pcie_event:299:(pid 268269): Detected insufficient power on the PCIe slot (27W).";
        assert_eq!(
            nic_event(power),
            Some((
                NicEventKind::SlotPower,
                "0000:5c:00.0".into(),
                "slot gives 27W".into()
            ))
        );
        assert_eq!(
            nic_event("mlx5_core 0000:5c:00.0: firmware version: 28.39.1002"),
            None
        );
        assert_eq!(nic_event("e1000e 0000:00:1f.6 eno1: Link up"), None);
    }
}

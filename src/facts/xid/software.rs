//! What NVIDIA's software (not its hardware) says in the kernel log: the GPUDirect RDMA peer
//! memory client complaining about a registration it was asked to free, and a process that
//! crashed inside NCCL.
//!
//! - `nvidia-peermem nv_get_p2p_free_callback:127 ERROR detected invalid context, skipping
//!   further processing` (the open driver's `nvidia-peermem.c`; the older out-of-tree `nv_mem`
//!   module prints the same). NVIDIA: "harmless", the print of a mitigation for bug 4272659
//!   (535.129.03 release notes), fully fixed in R560, "with those drivers, that diagnostic should
//!   never appear" (Mellanox/nv_peer_memory#120).
//! - `nv_mem nv_get_p2p_free_callback:144 nv_get_p2p_free_callback -- invalid page_table`
//!   (and `-- invalid dma_mapping`): "a GPU kernel driver with a known problem" fixed in R510 and
//!   R470 after May 2021, or the memory-region clean-up bug of Mellanox/nv_peer_memory#53.
//! - `pt_main_thread[2536443]: segfault at 7f797fe00000 ip ... sp ... error 4 in
//!   libnccl.so.2[7f7c7ac00000+d3d3000]` (`arch/x86/mm/fault.c` `show_signal_msg`, the library
//!   from `print_vma_addr`; 6.x kernels add `[offset,` before the base and ` likely on CPU N
//!   (core N, socket N)` after, and may print the ` in lib[...]` part as a line of its own).
//!
//! Real lines: tests/data/kernel/ (`peermem-*`, `segfault-*`; README names each source).

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SoftwareEventKind {
    /// nvidia-peermem's `detected invalid context`.
    PeermemInvalidContext,
    /// The peer memory client's `invalid page_table` / `invalid dma_mapping`.
    PeermemInvalidMapping,
    /// The module loader refused the peer memory module: `nv_peer_mem: Unknown symbol
    /// ib_register_peer_memory_client (err -22)`, `nvidia_peermem: disagrees about version of
    /// symbol …` (kernel/module/main.c, `resolve_symbol_wait`, `check_version`): it was built
    /// against another kernel, ib_core (MLNX_OFED or inbox) or NVIDIA driver than the ones
    /// loaded, and GPUDirect RDMA is off.
    PeermemLoadFailed,
    /// A process killed by a fault whose instruction was inside an NCCL library.
    NcclCrash,
}

/// One such line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SoftwareEvent {
    pub kind: SoftwareEventKind,
    /// The module (`nvidia-peermem`, `nv_mem`) or the library (`libnccl.so.2`).
    pub source: String,
    /// The crashed process and its pid (`pt_main_thread`, 2536443), for a crash.
    pub process: Option<String>,
    pub pid: Option<u32>,
    pub line_number: usize,
    pub boot: u32,
    pub stamp: Option<super::Stamp>,
    /// The line (two for a crash whose library came on its own line), prefix removed.
    pub message: String,
}

/// Events kept per log (a peermem storm prints tens of thousands of lines, nv_peer_memory#120:
/// the count past this is what matters, and the check says it from `dropped`).
pub const MAX_SOFTWARE_EVENTS: usize = 4096;

/// A crash line that did not name its library: a following line may (`in lib[...]`).
struct PendingCrash {
    process: String,
    pid: Option<u32>,
    /// The faulting instruction: which of several pending crashes a library line is about.
    ip: Option<u64>,
    line_number: usize,
    boot: u32,
    stamp: Option<super::Stamp>,
    message: String,
}

/// Crash lines waiting for their library line at once (6.x kernels interleave two processes'
/// halves: `a: segfault ...`, `b: segfault ...`, ` in liba[...]`, ` in b[...]`), and how many
/// lines after its crash line a library line may come.
const MAX_PENDING: usize = 4;
const PENDING_LINES: usize = 4;

/// Reads the lines above one at a time, keeping what it finds.
#[derive(Default)]
pub(super) struct SoftwareReader {
    pending: Vec<PendingCrash>,
    pub events: Vec<SoftwareEvent>,
    /// Events found past [`MAX_SOFTWARE_EVENTS`].
    pub dropped: usize,
}

impl SoftwareReader {
    /// Whether `message` (prefix removed) was one of these lines.
    pub fn line(
        &mut self,
        message: &str,
        line_number: usize,
        boot: u32,
        stamp: Option<super::Stamp>,
    ) -> bool {
        self.pending
            .retain(|p| p.boot == boot && p.line_number + PENDING_LINES >= line_number);
        if let Some((library, range)) = library_line(message) {
            // The crash whose instruction lies in the mapping, else the oldest one waiting.
            let at = self
                .pending
                .iter()
                .position(|p| matches!((p.ip, range), (Some(ip), Some((base, size))) if ip >= base && ip - base < size))
                .or((!self.pending.is_empty()).then_some(0));
            if let Some(pending) = at.map(|i| self.pending.remove(i))
                && is_nccl_library(&library)
            {
                let message = format!("{}\n{}", pending.message, message.trim());
                self.push(SoftwareEvent {
                    kind: SoftwareEventKind::NcclCrash,
                    source: library,
                    process: Some(pending.process),
                    pid: pending.pid,
                    line_number: pending.line_number,
                    boot: pending.boot,
                    stamp: pending.stamp,
                    message,
                });
            }
            return true;
        }
        if let Some((kind, module)) = peermem_event(message) {
            self.push(SoftwareEvent {
                kind,
                source: module,
                process: None,
                pid: None,
                line_number,
                boot,
                stamp,
                message: message.trim().to_string(),
            });
            return true;
        }
        let Some(crash) = segfault(message) else {
            return false;
        };
        match crash.library {
            Some(library) if is_nccl_library(&library) => self.push(SoftwareEvent {
                kind: SoftwareEventKind::NcclCrash,
                source: library,
                process: Some(crash.process),
                pid: crash.pid,
                line_number,
                boot,
                stamp,
                message: message.trim().to_string(),
            }),
            Some(_) => {}
            None => {
                if self.pending.len() == MAX_PENDING {
                    self.pending.remove(0);
                }
                self.pending.push(PendingCrash {
                    process: crash.process,
                    pid: crash.pid,
                    ip: crash.ip,
                    line_number,
                    boot,
                    stamp,
                    message: message.trim().to_string(),
                });
            }
        }
        true
    }

    fn push(&mut self, event: SoftwareEvent) {
        if self.events.len() < MAX_SOFTWARE_EVENTS {
            self.events.push(event);
        } else {
            self.dropped += 1;
        }
    }
}

/// Whether a message is a line [`SoftwareReader`] reads (any crash line: its library may be on
/// the next one).
pub(super) fn is_software_line(message: &str) -> bool {
    peermem_event(message).is_some()
        || segfault(message).is_some()
        || library_line(message).is_some()
}

/// A peer-memory line: its kind and module.
pub(super) fn peermem_event(message: &str) -> Option<(SoftwareEventKind, String)> {
    let t = message.trim();
    for module in ["nvidia_peermem", "nv_peer_mem"] {
        if let Some(rest) = t.strip_prefix(module).and_then(|r| r.strip_prefix(": "))
            && (rest.starts_with("Unknown symbol ")
                || rest.starts_with("disagrees about version of symbol "))
        {
            return Some((SoftwareEventKind::PeermemLoadFailed, module.to_string()));
        }
    }
    if !t.contains("nv_get_p2p_free_callback") {
        return None;
    }
    let module = t.split_whitespace().next().unwrap_or("nvidia-peermem");
    let kind = if t.contains("invalid context") {
        SoftwareEventKind::PeermemInvalidContext
    } else if t.contains("invalid page_table") || t.contains("invalid dma_mapping") {
        SoftwareEventKind::PeermemInvalidMapping
    } else {
        return None;
    };
    Some((kind, module.to_string()))
}

/// A `comm[pid]: segfault at ...` line: the process, its pid, and the library when the line
/// names it (`None`: it may follow on the next line).
pub(super) struct Segfault {
    pub process: String,
    pub pid: Option<u32>,
    pub ip: Option<u64>,
    pub library: Option<String>,
}

pub(super) fn segfault(message: &str) -> Option<Segfault> {
    let t = message.trim();
    let (head, rest) = t.split_once("]: segfault at ")?;
    let (process, pid) = head.rsplit_once('[')?;
    // The process name is the last word: syslog lines may leave `kernel: ` in front.
    let process = process.rsplit(' ').next().unwrap_or(process);
    let library = rest
        .split_once(" in ")
        .and_then(|(_, l)| library_name(l))
        .map(|(name, _)| name);
    let ip = rest
        .split_once(" ip ")
        .and_then(|(_, r)| r.split_whitespace().next())
        .and_then(|hex| u64::from_str_radix(hex, 16).ok());
    Some(Segfault {
        process: process.to_string(),
        pid: pid.parse().ok(),
        ip,
        library,
    })
}

/// `in libnccl.so.2[7f7c...+d3d3000] likely on CPU 3` (a line of its own, trimmed) → the
/// library and its mapping (base, size).
pub(super) fn library_line(message: &str) -> Option<(String, Option<(u64, u64)>)> {
    message.trim().strip_prefix("in ").and_then(library_name)
}

/// `libnccl.so.2[7f7c7ac00000+d3d3000] ...` (or `[af2e1a,75b6d2000000+c00000]` on 6.x, the
/// offset first) → (`libnccl.so.2`, (base, size)).
fn library_name(text: &str) -> Option<(String, Option<(u64, u64)>)> {
    let name = text.split(['[', ' ']).next()?.trim();
    if name.is_empty() {
        return None;
    }
    let range = text
        .split_once('[')
        .and_then(|(_, r)| r.split_once(']'))
        .map(|(r, _)| r.rsplit(',').next().unwrap_or(r))
        .and_then(|r| r.split_once('+'))
        .and_then(|(base, size)| {
            Some((
                u64::from_str_radix(base, 16).ok()?,
                u64::from_str_radix(size, 16).ok()?,
            ))
        });
    Some((name.to_string(), range))
}

/// Whether a crash in this library is NCCL's: `libnccl.so.2`, `libnccl.so.2.19.3`, and NCCL's
/// network plugins (`libnccl-net.so`, `libnccl-net-ofi.so`), which run inside its proxy thread.
pub fn is_nccl_library(name: &str) -> bool {
    name.starts_with("libnccl")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_segfault_line_in_its_shapes() {
        // gpud's dmesg sample (components/accelerator/nvidia/nccl); zed#35758's 6.x shape.
        let s = segfault("pt_main_thread[2536443]: segfault at 7f797fe00000 ip 00007f7c7ac69996 sp 00007f7c12fd7c30 error 4 in libnccl.so.2[7f7c7ac00000+d3d3000]").unwrap();
        assert_eq!(
            (s.process.as_str(), s.pid, s.library.as_deref()),
            ("pt_main_thread", Some(2536443), Some("libnccl.so.2"))
        );
        let s = segfault("zed-editor[11804]: segfault at 25c ip 000075b6d26f2e1a sp 00007ffc262183a0 error 4 in libnvidia-glcore.so.575.64.03[af2e1a,75b6d2000000+c00000] likely on CPU 10 (core 20, socket 0)").unwrap();
        assert_eq!(s.library.as_deref(), Some("libnvidia-glcore.so.575.64.03"));
        let s = segfault(
            "kernel: xskxceiver[1441]: segfault at 7f410000000b ip 00000000004042b5 sp 00007f415bffecf0 error 4",
        )
        .unwrap();
        assert_eq!((s.process.as_str(), s.library), ("xskxceiver", None));
        assert_eq!(s.ip, Some(0x4042b5));
        assert_eq!(
            library_line(" in libc.so.6[61c9d,7f4161aaf000+160000]"),
            Some(("libc.so.6".into(), Some((0x7f4161aaf000, 0x160000))))
        );
        assert!(segfault("python3: segfault at 0").is_none());
        assert!(segfault("").is_none());
        assert!(is_nccl_library("libnccl.so.2.19.3") && is_nccl_library("libnccl-net.so"));
        assert!(!is_nccl_library("libc.so.6"));
    }

    #[test]
    fn reads_peermem_lines() {
        assert_eq!(
            peermem_event(
                "nvidia-peermem nv_get_p2p_free_callback:127 ERROR detected invalid context, skipping further processing"
            ),
            Some((
                SoftwareEventKind::PeermemInvalidContext,
                "nvidia-peermem".into()
            ))
        );
        assert_eq!(
            peermem_event(
                "nv_mem nv_get_p2p_free_callback:144 nv_get_p2p_free_callback -- invalid page_table "
            ),
            Some((SoftwareEventKind::PeermemInvalidMapping, "nv_mem".into()))
        );
        assert_eq!(peermem_event("nvidia-peermem: loaded"), None);
    }
}

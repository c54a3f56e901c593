//! driver.machine_checks on small captures: EDAC counters in sysfs, the kernel log as
//! `.gpudoctor/kmsg.txt`, the uptime, and a `--sample` window's first reading.

use super::*;
use crate::report::Status;
use crate::source::ReplaySource;

struct Node {
    dir: tempfile::TempDir,
}

impl Node {
    fn new() -> Self {
        let node = Node {
            dir: tempfile::tempdir().unwrap(),
        };
        node.write(".gpudoctor/manifest.json", r#"{"format_version": 1}"#);
        // Two days of uptime.
        node.write("proc/uptime", "172800.00 1382400.00\n");
        node
    }
    fn write(&self, rel: &str, text: &str) -> &Self {
        let path = self.dir.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
        self
    }
    fn mc(&self, name: &str, ce: u64, ue: u64) -> &Self {
        self.write(&format!("{EDAC_MC}/{name}/ce_count"), &format!("{ce}\n"))
            .write(&format!("{EDAC_MC}/{name}/ue_count"), &format!("{ue}\n"))
            .write(
                &format!("{EDAC_MC}/{name}/mc_name"),
                "Skylake Socket#0 IMC#0\n",
            )
    }
    fn log(&self, sample: &str) -> &Self {
        let path = format!("{}/tests/data/kernel/{sample}", env!("CARGO_MANIFEST_DIR"));
        self.write(
            ".gpudoctor/kmsg.txt",
            &std::fs::read_to_string(path).unwrap(),
        )
    }
    fn run(&self) -> Outcome {
        let source = ReplaySource::open(self.dir.path()).unwrap();
        let ctx = Context::new(&source);
        machine_checks(&ctx)
    }
}

#[test]
fn clean_controllers_pass() {
    let node = Node::new();
    node.mc("mc0", 0, 0).mc("mc1", 3, 0);
    let out = node.run();
    assert_eq!(out.status, Status::Pass, "{out:?}");
    assert!(
        out.summary.contains("2 memory controller(s)"),
        "{}",
        out.summary
    );
    // 3 over two days is 1.5 per 24 h: under mcelog's 10.
    assert!((ce_rate(&out, "mc1").unwrap() * 86_400.0 - 1.5).abs() < 1e-9);
}

#[test]
fn an_uncorrected_count_fails_for_hardware_inspection() {
    let node = Node::new();
    node.mc("mc0", 0, 0).mc("mc3", 0, 1);
    let out = node.run();
    assert_eq!(out.status, Status::Fail, "{out:?}");
    assert_eq!(out.action, Action::HardwareInspection);
    assert!(
        out.summary
            .contains("mc3 (Skylake Socket#0 IMC#0) 1 uncorrected"),
        "{}",
        out.summary
    );
    assert_eq!(out.evidence[0].source, format!("/{EDAC_MC}/mc3/ue_count"));
}

#[test]
fn the_logs_uncorrected_lines_fail_without_edac() {
    let node = Node::new();
    node.log("ghes-pcie-recoverable-ovro-lwa-117.txt");
    let out = node.run();
    assert_eq!(out.status, Status::Fail, "{out:?}");
    assert!(
        out.summary.contains("1 uncorrected memory error(s)"),
        "{}",
        out.summary
    );
    assert!(
        out.evidence
            .iter()
            .any(|e| e.observed.starts_with("EDAC MC3: 1 UE memory read error")),
        "{:?}",
        out.evidence
    );
    let node = Node::new();
    node.log("mce-uncorrected-at-boot-mcelog-70.txt");
    let out = node.run();
    assert_eq!(out.status, Status::Fail, "{out:?}");
    assert!(
        out.summary.contains("uncorrected cpu machine check"),
        "{}",
        out.summary
    );
}

#[test]
fn corrected_errors_warn_above_ten_a_day() {
    // EDAC: 30 over two days of uptime is 15 per 24 h.
    let node = Node::new();
    node.mc("mc0", 30, 0);
    let out = node.run();
    assert_eq!(out.status, Status::Warn, "{out:?}");
    assert!(
        out.summary.contains("over 2 days of uptime"),
        "{}",
        out.summary
    );
    // The log alone: 262 corrected in this boot.
    let node = Node::new();
    node.log("edac-ce-dmesg-T-illinois-scicomp-66.txt");
    let out = node.run();
    assert_eq!(out.status, Status::Warn, "{out:?}");
    assert!(
        out.summary.contains("262 corrected memory error(s)"),
        "{}",
        out.summary
    );
    assert!(
        out.summary.contains("judged from the kernel log alone"),
        "{}",
        out.summary
    );
    // One corrected error over two days passes.
    let node = Node::new();
    node.log("edac-ce-sbridge-radiasoft-134.txt");
    assert_eq!(node.run().status, Status::Pass);
}

#[test]
fn the_sample_window_judges_the_rise() {
    // 5000 since boot is history if none came during the window...
    let node = Node::new();
    node.mc("mc0", 5000, 0).write(
        crate::answers::baseline::SAMPLE_JSON,
        r#"{"window_s": 60.0, "edac": {"mc0": {"ce_count": 5000, "ue_count": 0}}}"#,
    );
    let out = node.run();
    assert_eq!(out.status, Status::Pass, "{out:?}");
    assert_eq!(ce_rate(&out, "mc0"), Some(0.0));
    // ... and one that came during it is far above 10 per 24 h.
    let node = Node::new();
    node.mc("mc0", 5001, 0).write(
        crate::answers::baseline::SAMPLE_JSON,
        r#"{"window_s": 60.0, "edac": {"mc0": {"ce_count": 5000, "ue_count": 0}}}"#,
    );
    let out = node.run();
    assert_eq!(out.status, Status::Warn, "{out:?}");
    assert!(
        out.summary
            .contains("1 corrected memory error(s) over a 1 min window"),
        "{}",
        out.summary
    );
}

#[test]
fn unreadable_and_absent_inputs() {
    // No EDAC, no log: nothing to judge.
    assert_eq!(Node::new().run().status, Status::Skip);
    // A counter that is not a number is named, not guessed.
    let node = Node::new();
    node.mc("mc0", 0, 0)
        .write(&format!("{EDAC_MC}/mc0/ue_count"), "garbage\n");
    let out = node.run();
    assert_eq!(out.status, Status::Error, "{out:?}");
    assert!(
        out.evidence
            .iter()
            .any(|e| e.source.ends_with("mc0/ue_count")),
        "{out:?}"
    );
    // An uncorrected error before the last boot is history.
    let node = Node::new();
    node.write(
        ".gpudoctor/kmsg.txt",
        "[11189.970968] EDAC MC3: 1 UE memory read error on CPU_SrcID#1_MC#1_Chan#2_DIMM#0 (channel:2 slot:0)\n[    0.000000] Linux version 6.8.0-45-generic (buildd@lcy02-amd64-075)\n",
    );
    let out = node.run();
    assert_eq!(out.status, Status::Warn, "{out:?}");
    assert!(
        out.summary.contains("before the last boot"),
        "{}",
        out.summary
    );
}

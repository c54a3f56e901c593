//! The GPUDirect RDMA loopbacks (`--bandwidth`) run live against the stand-in `ib_write_bw`
//! (tests/fake-perftest: it listens on its TCP port and block-buffers its banner into a pipe as
//! perftest does, and can hang, crash, print garbage, refuse `--use_cuda` like a CUDA-less
//! build). What is checked:
//! - only the GPU rails are looped back (PIX/PXB, or the profile's `rdma_devices`), never a VF,
//!   a front-end or storage NIC, a GPU in MIG mode or one in exclusive-process compute mode,
//!   and the report says which devices were left out and why;
//! - a hang, crash, garbage or failure of one loopback is named within the timeout, the other
//!   HCAs keep their figures, and nothing is left running;
//! - without perftest the loopbacks skip (or fail when `--perftest-dir` was given), a CUDA-less
//!   perftest is no hardware verdict, and a capture replays the same;
//! - perftest's real outputs (tests/data/perftest/) parse as they read.

mod common;
common::tests_mostly_wait!();

use std::path::Path;
use std::time::Duration;

use common::live::{SLACK, check, live_from, record_command, replay_all, stderr};
use serde_json::Value;

#[test]
fn loopbacks_that_hang_crash_or_print_garbage_are_named_within_the_timeout() {
    let live = live_from("h100-bandwidth-healthy");
    for (hca, mode) in [
        ("mlx5_1", "hang"),
        ("mlx5_2", "crash"),
        ("mlx5_3", "garbage"),
        ("mlx5_4", "fail"),
        ("mlx5_5", "server-hang"),
    ] {
        std::fs::write(live.perftest.join(format!("{hca}.mode")), mode).unwrap();
    }
    // 4 s: a healthy stand-in loopback took over 2 s once under the whole suite's load on two
    // cores, and lost its figure to the timeout.
    let (out, report, elapsed) =
        live.run(&["--bandwidth", "--cuda-timeout", "4", "--only", "rdma"]);
    // Two loopbacks stopped at 4 s each (plus grace), six quick ones (the eight rails).
    assert!(
        elapsed < Duration::from_secs(2 * (4 + 6) + 8 * 2) + SLACK,
        "{elapsed:?}"
    );
    let gdr = check(&report, "rdma.gpudirect_bandwidth");
    assert_eq!(gdr["status"], "fail", "{gdr}");
    let evidence = gdr["evidence"].to_string();
    for (hca, what) in [
        ("mlx5_1", "did not finish within 4 s"),
        ("mlx5_2", "printed no result (killed by signal 11)"),
        (
            "mlx5_3",
            "printed no result (exited 0): cut row `65536 oops nan`",
        ),
        ("mlx5_4", "failed: Couldn't connect to localhost"),
        ("mlx5_5", "never said it was listening within 4 s"),
    ] {
        assert!(
            evidence.contains(hca) && evidence.contains(what),
            "{hca}: `{what}` not in {evidence}"
        );
    }
    // The healthy HCAs kept their figures.
    let figures = gdr["figures"].as_array().unwrap();
    assert_eq!(figures.len(), 3, "{figures:?}");
    let calls = std::fs::read_to_string(live.perftest.join("calls")).unwrap();
    let client = calls
        .lines()
        .find(|l| l.starts_with("client mlx5_0 1 "))
        .unwrap_or_else(|| panic!("no client on mlx5_0:\n{calls}"));
    assert!(
        client.contains(" GPU-263526ca-0ed0-753b-08aa-4ed33dd41658 PCI_BUS_ID "),
        "the loopback must use the nearest GPU, by UUID:\n{calls}"
    );
    assert!(
        stderr(&out)
            .contains("gpudoctor: gpudirect: mlx5_1: no result row (stopped at the timeout)")
    );
    live.assert_nothing_left();
}

#[test]
fn without_perftest_the_loopbacks_skip_and_a_named_dir_without_it_fails() {
    let live = live_from("h100-bandwidth-healthy");
    let empty = common::tempdir().unwrap();
    let mut cmd = live.command(&["--bandwidth", "--only", "rdma"]);
    cmd.env("PATH", empty.path());
    let out = cmd.output().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let gdr = check(&report, "rdma.gpudirect_bandwidth");
    let installed = gpudoctor::source::gpudirect::COMMON_DIRS
        .iter()
        .any(|d| Path::new(d).join("ib_write_bw").exists());
    if installed {
        // This machine has perftest in a standard place: it is used.
        assert_ne!(gdr["status"], "skip", "{gdr}");
    } else {
        assert_eq!(gdr["status"], "skip", "{gdr}");
        assert!(
            gdr["summary"]
                .as_str()
                .unwrap()
                .contains("install the perftest package")
        );
    }
    let (out, report, _) = live.run(&[
        "--bandwidth",
        "--only",
        "rdma",
        "--perftest-dir",
        empty.path().to_str().unwrap(),
    ]);
    let gdr = check(&report, "rdma.gpudirect_bandwidth");
    // Asked means required: the directory named holds no ib_write_bw, the layer fails.
    assert_eq!(gdr["status"], "fail", "{gdr}");
    let summary = gdr["summary"].as_str().unwrap();
    assert!(summary.contains("--perftest-dir was given"), "{summary}");
    assert!(
        summary.contains(empty.path().to_str().unwrap()),
        "{summary}"
    );
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn a_perftest_dir_without_ib_write_bw_is_recorded_and_fails_the_replay_too() {
    let live = live_from("h100-bandwidth-healthy");
    let out_dir = common::tempdir().unwrap();
    let empty = common::tempdir().unwrap();
    let capture = out_dir.path().join("cap");
    let mut cmd = record_command(&live, &capture);
    cmd.arg("--bandwidth")
        .arg("--perftest-dir")
        .arg(empty.path());
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let not_found = capture.join(".gpudoctor/gpudirect/not-found.json");
    assert!(not_found.is_file(), "{}", stderr(&out));
    let report = replay_all(&capture);
    let gdr = check(&report, "rdma.gpudirect_bandwidth");
    assert_eq!(gdr["status"], "fail", "{gdr}");
    assert!(
        gdr["summary"]
            .as_str()
            .unwrap()
            .contains("--perftest-dir was given")
    );
    // Not asked for: the replay skips as the live run did, naming the package.
    std::fs::write(
        &not_found,
        r#"{"searched": ["PATH (/usr/bin)"], "asked": false}"#,
    )
    .unwrap();
    let gdr = check(&replay_all(&capture), "rdma.gpudirect_bandwidth").clone();
    assert_eq!(gdr["status"], "skip", "{gdr}");
    assert!(
        gdr["summary"]
            .as_str()
            .unwrap()
            .contains("install the perftest package")
    );
    live.assert_nothing_left();
}

#[test]
fn gid_lines_are_masked_in_a_capture() {
    // RoCE GIDs spell IP addresses (perftest#234's `...:255:255:10:255:255:05`).
    let text = std::fs::read_to_string(
        common::repo().join("tests/data/perftest/perftest-234-mb-cut-after-iterations.txt"),
    )
    .unwrap();
    let masked = gpudoctor::answers::perftest::mask_gids(&text);
    assert!(!masked.contains("255:255:10"), "{masked}");
    assert_eq!(masked.matches(" GID: <gid>").count(), 2);
    assert_eq!(masked.lines().count(), text.lines().count());
}

#[test]
fn every_real_perftest_output_parses_as_it_reads() {
    use gpudoctor::answers::perftest::{BwUnit, parse};
    let read = |name: &str| {
        std::fs::read_to_string(common::repo().join("tests/data/perftest").join(name)).unwrap()
    };
    // NDR, --report_gbits, a CPU frequency warning between header and row.
    let ndr = parse(&read("ndr-cx7-write-gbits-cpu-freq-warning.txt"));
    assert_eq!(ndr.unit, Some(BwUnit::GigabitsPerSec));
    assert_eq!(ndr.rows.len(), 1);
    assert_eq!(ndr.rows[0].bytes, 65536);
    assert_eq!(ndr.rows[0].average_gbits, 392.34);
    assert_eq!(ndr.rows[0].peak_gbits, 392.38);
    assert_eq!(ndr.device.as_deref(), Some("mlx5_0"));
    assert_eq!(ndr.link_type.as_deref(), Some("IB"));
    assert!(ndr.errors.is_empty(), "{:?}", ndr.errors);
    // MiB/sec: 46557.03 MiB/s = 390.55 Gb/s.
    let mib = parse(&read("ndr-cx7-send-mib-cpu-freq-warning.txt"));
    assert_eq!(mib.unit, Some(BwUnit::MebibytesPerSec));
    assert!(
        (mib.rows[0].average_gbits - 390.55).abs() < 0.01,
        "{:?}",
        mib.rows
    );
    // -D: no peak, tabs in the row.
    let duration = parse(&read("perftest-273-gbits-post-list.txt"));
    assert_eq!(duration.rows[0].peak_gbits, 0.0);
    assert_eq!(duration.rows[0].average_gbits, 0.48);
    assert_eq!(duration.rows[0].iterations, 224958464);
    // Cut inside the row: no figure, the cut row kept for the evidence.
    let cut = parse(&read("perftest-234-mb-cut-after-iterations.txt"));
    assert!(cut.rows.is_empty());
    assert_eq!(cut.malformed_rows, vec!["65536      664644"]);
    assert_eq!(cut.unit, Some(BwUnit::MebibytesPerSec));
    // A CUDA server cut in its parameter block: the GPU named, no table.
    let server = parse(&read("perftest-241-cuda-server-cut.txt"));
    assert!(server.rows.is_empty() && server.unit.is_none());
    assert_eq!(server.gpu_name.as_deref(), Some("NVIDIA A30"));
    assert!(server.gpu_memory);
    // A loopback sweep, indented: 23 sizes, the 8 MiB row read.
    let sweep = parse(&read("rocm-loopback-bidirectional-gbits-sweep.txt"));
    assert_eq!(sweep.rows.len(), 23);
    assert_eq!(sweep.rows[0].peak_gbits, 0.142947);
    assert_eq!(sweep.at_size(8 << 20).unwrap().average_gbits, 204.59);
    assert_eq!(
        sweep.test.as_deref(),
        Some("RDMA_Write Bidirectional BW Test")
    );
}

/// The GDR failure a missing peer-memory module gives (`nvidia_peermem`, or dma-buf not used):
/// perftest allocates the GPU buffer and cannot register it with the HCA. Real outputs from
/// perftest#31 (an old perftest) and perftest#346 (25.x), tests/data/perftest/README.md.
#[test]
fn a_gpu_buffer_the_hca_cannot_register_fails_naming_the_hca_and_the_error() {
    use gpudoctor::answers::perftest::parse;
    let sample = |name: &str| common::repo().join("tests/data/perftest").join(name);
    for (name, first) in [
        ("perftest-31-cuda-mr-fail.txt", "Couldn't allocate MR"),
        (
            "perftest-346-cuda-mr-error-14.txt",
            "Couldn't allocate MR with error=14",
        ),
    ] {
        let out = parse(&std::fs::read_to_string(sample(name)).unwrap());
        assert!(
            out.rows.is_empty() && out.malformed_rows.is_empty(),
            "{name}"
        );
        assert_eq!(
            out.errors.first().map(String::as_str),
            Some(first),
            "{name}"
        );
        assert!(
            out.errors
                .iter()
                .any(|e| e.contains("Couldn't create IB resources")),
            "{name}: {:?}",
            out.errors
        );
        assert!(out.gpu_memory, "{name}: the buffer was in GPU memory");
    }
    // Through a loopback: mlx5_3's client prints perftest#346's output.
    let live = live_from("h100-bandwidth-healthy");
    std::fs::copy(
        sample("perftest-346-cuda-mr-error-14.txt"),
        live.perftest.join("mlx5_3.out"),
    )
    .unwrap();
    let (out, report, _) = live.run(&["--bandwidth", "--only", "rdma"]);
    let gdr = check(&report, "rdma.gpudirect_bandwidth");
    assert_eq!(gdr["status"], "fail", "{gdr}");
    let summary = gdr["summary"].as_str().unwrap();
    assert!(
        summary.contains("mlx5_3") && summary.contains("Couldn't allocate MR with error=14"),
        "{summary}"
    );
    assert!(
        gdr["hint"].as_str().unwrap().contains("nvidia_peermem"),
        "{gdr}"
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    live.assert_nothing_left();
}

/// A perftest built without CUDA (what `apt install perftest` gives) refuses `--use_cuda` on the
/// server, which ends before it listens: no client starts, and the verdict is the build's —
/// an `error` with the install hint — never a hardware one. The same from the capture.
#[test]
fn a_perftest_without_cuda_is_not_a_hardware_verdict() {
    let live = live_from("h100-bandwidth-healthy");
    for entry in std::fs::read_dir(&live.perftest).unwrap() {
        let path = entry.unwrap().path();
        if let Some(hca) = path.file_stem().and_then(|s| s.to_str()) {
            std::fs::write(live.perftest.join(format!("{hca}.mode")), "no-cuda").unwrap();
        }
    }
    let (out, report, _) = live.run(&["--bandwidth", "--cuda-timeout", "10", "--only", "rdma"]);
    let gdr = check(&report, "rdma.gpudirect_bandwidth");
    assert_eq!(gdr["status"], "error", "{gdr}\n{}", stderr(&out));
    let summary = gdr["summary"].as_str().unwrap();
    assert!(
        summary.contains("cannot use GPU memory")
            && summary.contains("perftest was built without CUDA")
            // getopt names the program as gpudoctor started it (argv[0], a full path).
            && summary.contains("ib_write_bw: unrecognized option '--use_cuda=0'"),
        "{summary}"
    );
    assert!(
        gdr["hint"].as_str().unwrap().contains("built without it"),
        "{gdr}"
    );
    assert_eq!(gdr["action"], "fix_config", "{gdr}");
    let calls = std::fs::read_to_string(live.perftest.join("calls")).unwrap();
    assert!(!calls.contains("client "), "no client starts:\n{calls}");

    // Recorded and replayed: the same verdict from the kept server output.
    let capture = live.scratch.path().join("capture");
    let mut cmd = record_command(&live, &capture);
    cmd.args(["--bandwidth", "--cuda-timeout", "10"]);
    assert!(cmd.output().unwrap().status.success());
    let replayed = common::gpudoctor(&[
        "check",
        "--root",
        capture.to_str().unwrap(),
        "--only",
        "rdma",
        "--format",
        "json",
    ]);
    let replayed: Value = serde_json::from_slice(&replayed.stdout).unwrap();
    assert_eq!(
        check(&replayed, "rdma.gpudirect_bandwidth")["summary"],
        gdr["summary"]
    );
    live.assert_nothing_left();
}

/// The hosts' `calls` log: the devices a server or client started on.
fn looped_back(live: &common::live::Live) -> Vec<String> {
    let calls = std::fs::read_to_string(live.perftest.join("calls")).unwrap_or_default();
    let mut devices: Vec<String> = calls
        .lines()
        .filter_map(|l| l.split(' ').nth(1).map(str::to_string))
        .collect();
    devices.sort();
    devices.dedup();
    devices
}

fn left_out(gdr: &Value) -> String {
    gdr["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["source"] == "left out")
        .map(|e| e["observed"].as_str().unwrap().to_string())
        .unwrap_or_default()
}

fn rails(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("mlx5_{i}")).collect()
}

/// NCCL uses GPUDirect RDMA up to PXB: the two 200 GbE storage ports of the healthy HGX H100
/// (NODE to every GPU) are no rails. They are not looped back, nor held to a rail's floor, and
/// the report names them; a profile's `rdma_devices` chooses the rails instead.
#[test]
fn only_the_gpu_rails_are_looped_back_and_the_rest_is_named() {
    let live = live_from("h100-bandwidth-healthy");
    let (out, report, _) = live.run(&["--bandwidth", "--cuda-timeout", "10", "--only", "rdma"]);
    let gdr = check(&report, "rdma.gpudirect_bandwidth");
    assert_eq!(gdr["status"], "pass", "{gdr}\n{}", stderr(&out));
    assert_eq!(looped_back(&live), rails(8));
    assert!(
        left_out(gdr).starts_with("mlx5_8, mlx5_9: nearest GPU at NODE: not a GPU rail"),
        "{gdr}"
    );
    assert_eq!(gdr["figures"].as_array().unwrap().len(), 8, "{gdr}");

    // The profile names two rails: only they are looped back.
    let profile = live.scratch.path().join("two-rails.toml");
    std::fs::write(
        &profile,
        "name = \"two-rails\"\nbase = \"hgx-h100\"\nrdma_devices = [\"mlx5_0\", \"mlx5_1\"]\n",
    )
    .unwrap();
    std::fs::remove_file(live.perftest.join("calls")).unwrap();
    let (out, report, _) = live.run(&[
        "--bandwidth",
        "--cuda-timeout",
        "10",
        "--only",
        "rdma",
        "--profile",
        profile.to_str().unwrap(),
    ]);
    let gdr = check(&report, "rdma.gpudirect_bandwidth");
    assert_eq!(looped_back(&live), rails(2), "{}", stderr(&out));
    assert!(
        left_out(gdr).contains("mlx5_2, mlx5_3, mlx5_4, mlx5_5, mlx5_6, mlx5_7, mlx5_8, mlx5_9: not one of the two-rails profile's rdma_devices"),
        "{gdr}"
    );
    live.assert_nothing_left();
}

/// A GPU in MIG mode is reached by CUDA only through its MIG devices, and one in
/// exclusive-process compute mode takes one context: the loopback's server and client would
/// need two. Their HCAs are left out, named with the reason, and the other rails still run.
#[test]
fn hcas_of_mig_and_exclusive_process_gpus_are_left_out_by_name() {
    let live = live_from("h100-bandwidth-healthy");
    let mut nvml: Value =
        serde_json::from_str(&std::fs::read_to_string(&live.nvml).unwrap()).unwrap();
    for d in nvml["devices"].as_array_mut().unwrap() {
        match d["pci_bus_id"].as_str().unwrap() {
            "0000:18:00.0" => {
                d["mig_mode"] = serde_json::json!({"value": {"current": true, "pending": true}})
            }
            "0000:5d:00.0" => d["compute_mode"] = serde_json::json!({"value": "exclusive_process"}),
            _ => {}
        }
    }
    std::fs::write(&live.nvml, nvml.to_string()).unwrap();
    let (out, report, _) = live.run(&["--bandwidth", "--cuda-timeout", "10", "--only", "rdma"]);
    let gdr = check(&report, "rdma.gpudirect_bandwidth");
    assert_eq!(gdr["status"], "pass", "{gdr}\n{}", stderr(&out));
    let mut want = rails(8);
    want.retain(|d| d != "mlx5_0" && d != "mlx5_3");
    assert_eq!(looped_back(&live), want);
    let said = left_out(gdr);
    for part in [
        "mlx5_0: its GPU 0000:18:00.0 is in MIG mode",
        "mlx5_3: its GPU 0000:5d:00.0 is in compute mode Exclusive_Process",
    ] {
        assert!(said.contains(part), "`{part}` not in {said}");
    }
    live.assert_nothing_left();
}

/// SR-IOV VFs (mlx5_10..17 on the SR-IOV node, each at PIX to a GPU like its PF) belong to
/// Pods and share their PF's port: never looped back.
#[test]
fn sriov_vfs_are_not_looped_back() {
    let live = live_from("h100-sriov-healthy");
    let outputs = live_from("h100-bandwidth-healthy");
    for entry in std::fs::read_dir(&outputs.perftest).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, live.perftest.join(path.file_name().unwrap())).unwrap();
    }
    let (out, report, _) = live.run(&["--bandwidth", "--cuda-timeout", "10", "--only", "rdma"]);
    let gdr = check(&report, "rdma.gpudirect_bandwidth");
    assert_eq!(gdr["status"], "pass", "{gdr}\n{}", stderr(&out));
    assert_eq!(looped_back(&live), rails(8));
    let said = left_out(gdr);
    for vf in 10..18 {
        assert!(
            said.contains(&format!("mlx5_{vf}")),
            "mlx5_{vf} not in {said}"
        );
    }
    assert!(said.contains("an SR-IOV VF"), "{said}");
    live.assert_nothing_left();
}

/// The healthy node without nvidia_peermem: its open kernel module 550 on Linux 5.15 gives the
/// dma-buf path (`rdma.gpudirect` passes), so every loopback registers its buffer through
/// dma-buf. A live root of its own with the module gone from proc/modules and sys/module.
fn dmabuf_node(live: &mut common::live::Live) {
    live.own_root();
    let modules = live.root.join("proc/modules");
    let kept: String = std::fs::read_to_string(&modules)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with("nvidia_peermem "))
        .map(|l| format!("{}\n", l.replace("nvidia_peermem,", "")))
        .collect();
    std::fs::remove_file(&modules).unwrap();
    std::fs::write(&modules, kept).unwrap();
    std::fs::remove_dir_all(live.root.join("sys/module/nvidia_peermem")).unwrap();
}

/// Every rail of the stand-in in `mode`.
fn every_rail(live: &common::live::Live, mode: &str) {
    for hca in rails(8) {
        std::fs::write(live.perftest.join(format!("{hca}.mode")), mode).unwrap();
    }
}

/// On a node that reaches GPU memory through dma-buf, plain `--use_cuda` cannot register the
/// buffer (`Couldn't allocate MR`, perftest#346): the loopback passes `--use_cuda_dmabuf` after
/// `--use_cuda=0` (the order perftest takes, perftest#336) and the rails pass. On a node with
/// neither path the same failure is the setup's, never `hardware_inspection`.
#[test]
fn a_dmabuf_node_loops_back_through_dma_buf() {
    let mut live = live_from("h100-bandwidth-healthy");
    dmabuf_node(&mut live);
    every_rail(&live, "peermem-absent");
    let (out, report, _) = live.run(&["--bandwidth", "--cuda-timeout", "10", "--only", "rdma"]);
    assert_eq!(check(&report, "rdma.gpudirect")["status"], "pass");
    let gdr = check(&report, "rdma.gpudirect_bandwidth");
    assert_eq!(gdr["status"], "pass", "{gdr}\n{}", stderr(&out));
    let calls = std::fs::read_to_string(live.perftest.join("calls")).unwrap();
    assert_eq!(
        calls.matches("--use_cuda=0 --use_cuda_dmabuf").count(),
        16,
        "{calls}"
    );

    // The proprietary kernel module: no dma-buf either, so plain --use_cuda, which the HCAs
    // cannot register: a setup finding naming the cause and the fix.
    let version = live.root.join("proc/driver/nvidia/version");
    std::fs::remove_file(&version).unwrap();
    std::fs::write(
        &version,
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:15:33 UTC 2024\n",
    )
    .unwrap();
    std::fs::remove_file(live.perftest.join("calls")).unwrap();
    let (out, report, _) = live.run(&["--bandwidth", "--cuda-timeout", "10", "--only", "rdma"]);
    let gdr = check(&report, "rdma.gpudirect_bandwidth");
    assert_eq!(gdr["status"], "error", "{gdr}\n{}", stderr(&out));
    assert_ne!(gdr["action"], "hardware_inspection", "{gdr}");
    let summary = gdr["summary"].as_str().unwrap();
    assert!(
        summary.contains("no nvidia_peermem")
            && summary.contains("Couldn't allocate MR with error=14")
            && summary.contains("mlx5_7 port 1"),
        "{summary}"
    );
    assert!(
        gdr["hint"]
            .as_str()
            .unwrap()
            .contains("modprobe nvidia_peermem")
    );
    let calls = std::fs::read_to_string(live.perftest.join("calls")).unwrap();
    assert!(!calls.contains("--use_cuda_dmabuf"), "{calls}");
    live.assert_nothing_left();
}

/// perftest must find the host driver's libcuda: ≥ 25.07 `dlopen`s `libcuda.so` once
/// connected, older CUDA builds stop in the loader without `libcuda.so.1` (exit 127).
/// gpudoctor puts the directory the CUDA probe loads libcuda from first on perftest's
/// `LD_LIBRARY_PATH`; where it is not there, each way is a setup finding naming the
/// directory, never a hardware verdict.
#[test]
fn perftest_that_cannot_load_libcuda_is_a_setup_finding() {
    let mut live = live_from("h100-bandwidth-healthy");
    // --cuda-lib names the stand-in libcuda, whose directory has no libcuda.so(.1).
    let fake_dir = common::fake_cuda_lib()
        .parent()
        .unwrap()
        .display()
        .to_string();
    for (mode, said, cause) in [
        (
            "dlopen",
            "Failed to load CUDA library dynamically",
            "could not open libcuda.so",
        ),
        (
            "loader",
            "error while loading shared libraries: libcuda.so.1",
            "linked to libcuda.so.1",
        ),
    ] {
        every_rail(&live, mode);
        let (out, report, _) = live.run(&["--bandwidth", "--cuda-timeout", "10", "--only", "rdma"]);
        let gdr = check(&report, "rdma.gpudirect_bandwidth");
        assert_eq!(gdr["status"], "error", "{mode}: {gdr}\n{}", stderr(&out));
        assert_eq!(gdr["action"], "fix_config", "{mode}: {gdr}");
        let summary = gdr["summary"].as_str().unwrap();
        assert!(
            summary.contains(said) && summary.contains(cause) && summary.contains("mlx5_0 port 1"),
            "{mode}: {summary}"
        );
        assert!(
            gdr["hint"].as_str().unwrap().contains(&fake_dir),
            "{mode}: {gdr}"
        );
        assert_eq!(out.status.code(), Some(3), "{mode}");
    }
    // The host's driver directory under the root holds libcuda.so.1 and the unversioned
    // link: the CUDA probe loads it from there, and perftest finds it there too.
    live.own_root();
    let dir = live.root.join("usr/lib/x86_64-linux-gnu");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(common::fake_cuda_lib(), dir.join("libcuda.so.550.54.15")).unwrap();
    std::os::unix::fs::symlink("libcuda.so.550.54.15", dir.join("libcuda.so.1")).unwrap();
    std::os::unix::fs::symlink("libcuda.so.1", dir.join("libcuda.so")).unwrap();
    for mode in ["dlopen", "loader"] {
        every_rail(&live, mode);
        let out = live
            .command_with_lib(
                &["--bandwidth", "--cuda-timeout", "10", "--only", "rdma"],
                None,
            )
            .output()
            .unwrap();
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        let gdr = check(&report, "rdma.gpudirect_bandwidth");
        assert_eq!(gdr["status"], "pass", "{mode}: {gdr}\n{}", stderr(&out));
    }
    live.assert_nothing_left();
}

/// One rail whose perftest says ` Unsupported memory type` among seven that measured: the
/// check does not pass, and the rail is named with what perftest said.
#[test]
fn one_rail_that_could_not_use_gpu_memory_among_passing_ones_is_named() {
    let live = live_from("h100-bandwidth-healthy");
    std::fs::write(live.perftest.join("mlx5_5.mode"), "unsupported").unwrap();
    let (out, report, _) = live.run(&["--bandwidth", "--cuda-timeout", "10", "--only", "rdma"]);
    let gdr = check(&report, "rdma.gpudirect_bandwidth");
    assert_eq!(gdr["status"], "error", "{gdr}\n{}", stderr(&out));
    assert_ne!(gdr["action"], "hardware_inspection", "{gdr}");
    let summary = gdr["summary"].as_str().unwrap();
    assert!(
        summary.contains("Unsupported memory type")
            && summary.contains("on mlx5_5 port 1")
            && summary.contains("on 7 compute rail port(s)"),
        "{summary}"
    );
    assert_eq!(gdr["figures"].as_array().unwrap().len(), 7, "{gdr}");
    live.assert_nothing_left();
}

//! The real tools, not the stand-ins: NVIDIA's own `libnvidia-ml.so.1`, `libcuda.so.1` and
//! `nvidia-smi` (Debian non-free: `libnvidia-ml1`, `libcuda1`, `nvidia-smi`, driver 535),
//! perftest's `ib_write_bw` (`perftest`) and Open MPI's `mpirun` (`openmpi-bin`), each found where
//! Debian installs it. `.ci/run` installs them; under `CI=true` a missing one fails naming its
//! package, elsewhere the test says it skipped. What is proven:
//! - NVML: gpudoctor with `--nvml-lib` at the real library maps its init error and names it
//!   (`NVML_ERROR_DRIVER_NOT_LOADED` where no kernel driver runs), `nvidia-smi` says the same
//!   (its exit status is NVML's return code), and every NVML function gpudoctor resolves (what
//!   the stand-in exports, tests/fake-nvml) is in the real library's dynamic symbol table, or is
//!   newer than it and has the fallback the stand-in's old-driver build exercises;
//! - CUDA: `--cuda` with the real libcuda names `cuInit`'s error (`CUDA_ERROR_NO_DEVICE` without
//!   a GPU) and its driver version, and ends at once;
//! - perftest: `--version`, the arguments gpudoctor builds for a loopback
//!   (`source::gpudirect::common_args`) as the real parser takes them, its failure with no such
//!   RDMA device, its refusal of `--use_cuda` in a build without CUDA judged as a setup finding,
//!   end to end through `check --bandwidth`; the stand-in says what the real one says;
//! - Open MPI: `mpirun --version` is recognised (`pairs::launch::which_mpi`), and a pair's
//!   command line (`LaunchPlan::argv`) runs as a user and is refused as root without
//!   `--allow-run-as-root`, in Open MPI's words.
//!
//! On a GPU node (a kernel driver loaded) the NVML and CUDA legs expect success instead.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::live::{check, live_from, stderr};
use serde_json::Value;

const TRIPLET: &str = if cfg!(target_arch = "aarch64") {
    "aarch64-linux-gnu"
} else {
    "x86_64-linux-gnu"
};

/// The first of `candidates` that exists; without one, a failure naming `package` under
/// `CI=true`, else a note that the test skipped.
fn real(what: &str, candidates: &[String], package: &str) -> Option<PathBuf> {
    if let Some(found) = candidates.iter().map(PathBuf::from).find(|p| p.exists()) {
        return Some(found);
    }
    assert!(
        !common::on_ci(),
        "{what} not found in {}: .ci/run installs Debian's {package} (`apt-get install {package}`; the NVIDIA packages need the non-free and contrib components)",
        candidates.join(", ")
    );
    eprintln!(
        "{what} not found in {}: `apt-get install {package}` to run this test; skipped",
        candidates.join(", ")
    );
    None
}

fn library(soname: &str, package: &str) -> Option<PathBuf> {
    real(
        soname,
        &[
            format!("/usr/lib/{TRIPLET}/{soname}"),
            format!("/usr/lib64/{soname}"),
        ],
        package,
    )
}

fn program(name: &str, package: &str) -> Option<PathBuf> {
    real(name, &[format!("/usr/bin/{name}")], package)
}

/// A kernel driver runs here (a GPU node): the libraries then succeed.
fn driver_loaded() -> bool {
    Path::new("/proc/driver/nvidia/version").exists()
}

fn report_of(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not a report ({e}); stderr:\n{}", stderr(out)))
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn the_real_nvml_library_loads_and_its_init_error_is_named() {
    let Some(nvml) = library("libnvidia-ml.so.1", "libnvidia-ml1") else {
        return;
    };
    let empty = common::tempdir().unwrap();
    let out = common::gpudoctor(&[
        "check",
        "--root",
        empty.path().to_str().unwrap(),
        "--nvml-lib",
        nvml.to_str().unwrap(),
        "--only",
        "driver",
        "--keep-going",
        "--format",
        "json",
    ]);
    let report = report_of(&out);
    let init = check(&report, "driver.nvml_init");
    if driver_loaded() {
        assert_eq!(init["status"], "pass", "{init}");
        return;
    }
    assert_eq!(init["status"], "fail", "{init}");
    assert_eq!(
        init["summary"],
        "NVML cannot initialise: the nvidia driver is not loaded"
    );
    let observed = init["evidence"][0]["observed"].as_str().unwrap();
    // The kind gpudoctor maps NVML_ERROR_DRIVER_NOT_LOADED (9) to, and NVML's own words for it
    // (nvmlErrorString of the real library).
    assert_eq!(observed, "driver_not_loaded: NVIDIA driver is not loaded");
    assert_eq!(init["action"], "reload_driver");

    // nvidia-smi, NVIDIA's own client of the same library, says the same: its exit status is
    // NVML's return code (nvidia-smi(1), "RETURN VALUE").
    let Some(smi) = program("nvidia-smi", "nvidia-smi") else {
        return;
    };
    let smi = Command::new(smi).output().unwrap();
    assert_eq!(smi.status.code(), Some(9), "{}", text(&smi));
    assert!(
        text(&smi).contains("couldn't communicate with the NVIDIA driver"),
        "{}",
        text(&smi)
    );
}

/// The `nvml*` functions an ELF library defines, from its dynamic symbol table.
fn nvml_symbols(path: &Path) -> std::collections::BTreeSet<String> {
    use object::{Object, ObjectSymbol};
    let data = std::fs::read(path).unwrap();
    let file = object::File::parse(&*data).unwrap();
    file.dynamic_symbols()
        .filter(|s| s.is_definition())
        .filter_map(|s| s.name().ok())
        .filter(|n| n.starts_with("nvml"))
        .map(str::to_string)
        .collect()
}

#[test]
fn every_nvml_function_gpudoctor_resolves_is_in_the_real_library() {
    let Some(nvml) = library("libnvidia-ml.so.1", "libnvidia-ml1") else {
        return;
    };
    let real = nvml_symbols(&nvml);
    assert!(
        real.contains("nvmlInit_v2"),
        "{nvml:?} is no NVML: {real:?}"
    );
    // The stand-in exports exactly what gpudoctor calls (docs/testing.md: a function gpudoctor
    // starts calling is added to it); its old-driver build leaves out what newer drivers added.
    let called = nvml_symbols(common::fake_nvml_lib());
    let old_driver = nvml_symbols(common::fake_nvml_old_driver_lib());
    let missing_old: Vec<&String> = old_driver.difference(&real).collect();
    assert!(
        missing_old.is_empty(),
        "{} lacks these functions gpudoctor calls without a fallback: {missing_old:?}",
        nvml.display()
    );
    // What the real library lacks of the full set must be newer than it: each has a fallback,
    // which the old-driver build exercises (tests/live_nvml.rs).
    let newer: Vec<&String> = called.difference(&real).collect();
    for name in &newer {
        assert!(
            !old_driver.contains(*name),
            "{name} is missing from {} and gpudoctor has no fallback for it",
            nvml.display()
        );
    }
    eprintln!(
        "{}: {} nvml functions; of the {} gpudoctor resolves it lacks {newer:?} (newer; their fallbacks run)",
        nvml.display(),
        real.len(),
        called.len()
    );
}

#[test]
fn the_real_libcuda_names_its_error_and_nothing_hangs() {
    let Some(cuda) = library("libcuda.so.1", "libcuda1") else {
        return;
    };
    let nvml = library("libnvidia-ml.so.1", "libnvidia-ml1")
        .unwrap_or_else(|| common::fake_nvml_lib().to_path_buf());
    let empty = common::tempdir().unwrap();
    let started = Instant::now();
    let out = common::gpudoctor(&[
        "check",
        "--root",
        empty.path().to_str().unwrap(),
        "--nvml-lib",
        nvml.to_str().unwrap(),
        "--cuda",
        "--cuda-lib",
        cuda.to_str().unwrap(),
        "--cuda-timeout",
        "20",
        "--only",
        "driver",
        "--format",
        "json",
    ]);
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    let report = report_of(&out);
    let cuda_check = check(&report, "driver.cuda");
    assert!(
        stderr(&out).contains(&format!("probing with {}", cuda.display())),
        "{}",
        stderr(&out)
    );
    if driver_loaded() {
        assert_ne!(cuda_check["status"], "error", "{cuda_check}");
        return;
    }
    assert_eq!(cuda_check["status"], "fail", "{cuda_check}");
    assert!(
        cuda_check["summary"]
            .as_str()
            .unwrap()
            .starts_with("cuInit: CUDA_ERROR_NO_DEVICE"),
        "{cuda_check}"
    );
    // No driver: NVML saw no GPU either, so nothing reads as a contradiction.
    assert!(
        !cuda_check["summary"].as_str().unwrap().contains("although"),
        "{cuda_check}"
    );
    let evidence = cuda_check["evidence"].to_string();
    assert!(
        evidence.contains("CUDA_ERROR_NO_DEVICE (100)"),
        "{evidence}"
    );
    // The driver version read from the real library (cuDriverGetVersion and its file name).
    assert!(evidence.contains("libcuda is driver "), "{evidence}");
}

/// A loopback target on an HCA that exists nowhere: the real server stops at the device lookup
/// on every machine, with RDMA devices or without.
fn nowhere(dmabuf: bool) -> gpudoctor::answers::gpudirect::GdrTarget {
    gpudoctor::answers::gpudirect::GdrTarget {
        device: "gpudoctor_no_such_hca".into(),
        port: 1,
        gpu: None,
        gpu_uuid: None,
        gpu_ordinal: Some(0),
        path: None,
        dmabuf,
    }
}

/// Run `ib_write_bw` with `args`, stopped after 20 s (a server that found a device would wait
/// for its client for ever).
fn ib_write_bw(binary: &Path, args: &[String]) -> Output {
    let mut child = Command::new(binary)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!(
                "{} {} did not end within 20 s",
                binary.display(),
                args.join(" ")
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn the_real_ib_write_bw_takes_the_arguments_gpudoctor_builds() {
    use gpudoctor::answers::perftest::parse;
    use gpudoctor::source::gpudirect::common_args;
    let Some(binary) = program("ib_write_bw", "perftest") else {
        return;
    };
    // --version: `Version: X.Y` and exit 1 (perftest's VERSION_EXIT), as the stand-in.
    let version = Command::new(&binary).arg("--version").output().unwrap();
    assert_eq!(version.status.code(), Some(1), "{}", text(&version));
    assert!(
        text(&version).starts_with("Version: "),
        "{}",
        text(&version)
    );
    let fake = common::fake_perftest_dir().join("ib_write_bw");
    let fake_version = Command::new(&fake).arg("--version").output().unwrap();
    assert_eq!(fake_version.status.code(), version.status.code());
    assert!(text(&fake_version).starts_with("Version: "));

    let help = Command::new(&binary).arg("--help").output().unwrap();
    let cuda_build = text(&help).contains("--use_cuda");

    // Every argument gpudoctor builds but the GPU memory ones: the parser takes them, and the
    // run stops at the device, in perftest's words, which gpudoctor's parser reads as errors.
    let args: Vec<String> = common_args(&nowhere(false), 18999)
        .into_iter()
        .filter(|a| !a.starts_with("--use_cuda"))
        .collect();
    let out = ib_write_bw(&binary, &args);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = text(&out);
    assert!(
        !said.contains("Invalid Command") && !said.contains("unrecognized option"),
        "{said}"
    );
    let parsed = parse(&said);
    assert!(
        parsed
            .errors
            .iter()
            .any(|e| e == "Unable to find the Infiniband/RoCE device"),
        "{parsed:?}"
    );
    assert!(parsed.rows.is_empty());

    // With --use_cuda=0 (and --use_cuda_dmabuf after it): a build without CUDA, as Debian's,
    // refuses the option in the parser; gpudoctor calls that the build, never the rail.
    for dmabuf in [false, true] {
        let args = common_args(&nowhere(dmabuf), 18999);
        let out = ib_write_bw(&binary, &args);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        let said = text(&out);
        if cuda_build {
            assert!(!said.contains("unrecognized option"), "{said}");
            continue;
        }
        let words = format!("{}: unrecognized option '--use_cuda=0'", binary.display());
        assert!(said.contains(&words), "{said}");
        let run = gpudoctor::answers::gpudirect::GdrRun {
            device: "gpudoctor_no_such_hca".into(),
            port: 1,
            meta: Some(gpudoctor::answers::gpudirect::GdrMeta {
                command: args.clone(),
                ..Default::default()
            }),
            output: parse(&said),
            origin: "server".into(),
            transcript: None,
        };
        let (cause, line) = gpudoctor::checks::active::no_gpu_memory(&run, None).unwrap();
        assert_eq!(cause, gpudoctor::checks::active::NoGpuMemory::CudaLeftOut);
        assert_eq!(line, words);
        // The stand-in's `no-cuda` says it in the same words, on the same streams.
        let scratch = common::tempdir().unwrap();
        std::fs::write(scratch.path().join("gpudoctor_no_such_hca.mode"), "no-cuda").unwrap();
        let fake_out = Command::new(&fake)
            .args(&args)
            .env("GPUDOCTOR_FAKE_PERFTEST", scratch.path())
            .output()
            .unwrap();
        assert_eq!(fake_out.status.code(), out.status.code());
        assert_eq!(
            String::from_utf8_lossy(&fake_out.stderr).replace(&fake.display().to_string(), "IB"),
            String::from_utf8_lossy(&out.stderr).replace(&binary.display().to_string(), "IB")
        );
        assert_eq!(
            String::from_utf8_lossy(&fake_out.stdout).lines().count(),
            String::from_utf8_lossy(&out.stdout).lines().count(),
            "the usage"
        );
    }
}

/// End to end: `check --bandwidth` with the real `ib_write_bw` (`--perftest-dir`) on the
/// healthy H100 fixture's rails. Debian's build has no CUDA: a setup finding in perftest's
/// words, never a hardware verdict; a CUDA build finds no such HCA here: named, not passed.
#[test]
fn check_bandwidth_with_the_real_ib_write_bw() {
    let Some(binary) = program("ib_write_bw", "perftest") else {
        return;
    };
    let dir = binary.parent().unwrap().to_str().unwrap().to_string();
    let live = live_from("h100-bandwidth-healthy");
    let (out, report, elapsed) = live.run(&[
        "--bandwidth",
        "--cuda-timeout",
        "10",
        "--only",
        "rdma",
        "--perftest-dir",
        &dir,
    ]);
    assert!(elapsed < Duration::from_secs(8 * 30), "{elapsed:?}");
    let gdr = check(&report, "rdma.gpudirect_bandwidth");
    assert_ne!(gdr["status"], "pass", "{gdr}");
    let help = Command::new(&binary).arg("--help").output().unwrap();
    if !text(&help).contains("--use_cuda") {
        assert_eq!(gdr["status"], "error", "{gdr}\n{}", stderr(&out));
        assert_eq!(gdr["action"], "fix_config", "{gdr}");
        let summary = gdr["summary"].as_str().unwrap();
        assert!(
            summary.contains("perftest was built without CUDA")
                && summary.contains(&format!(
                    "{}: unrecognized option '--use_cuda=0'",
                    binary.display()
                ))
                && summary.contains("mlx5_7 port 1"),
            "{summary}"
        );
    } else {
        assert!(gdr["summary"].as_str().unwrap().contains("mlx5_0"), "{gdr}");
    }
    live.assert_nothing_left();
}

#[test]
fn the_real_mpirun_runs_a_pairs_command_as_a_user_and_refuses_root() {
    use gpudoctor::pairs::launch::{LaunchPlan, LauncherKind, which_mpi};
    let Some(mpirun) = program("mpirun", "openmpi-bin") else {
        return;
    };
    let version = Command::new(&mpirun).arg("--version").output().unwrap();
    assert!(version.status.success(), "{}", text(&version));
    let named = which_mpi(&text(&version)).unwrap().unwrap();
    assert!(named.starts_with("mpirun (Open MPI) "), "{named}");

    // A pair's command line as `gpudoctor pairs` builds it, both "hosts" this one, each rank
    // printing the variable the plan exports with -x.
    let plan = LaunchPlan {
        kind: LauncherKind::Mpirun,
        program: mpirun.display().to_string(),
        extra: Vec::new(),
        gpus_per_node: 1,
        env: vec![("NCCL_DEBUG".into(), "INFO".into())],
        binary: "/bin/sh".into(),
        sweep: vec!["-c".into(), "echo rank sees NCCL_DEBUG=$NCCL_DEBUG".into()],
    };
    let argv = plan.argv("localhost", "localhost");
    let as_root = unsafe { libc::geteuid() } == 0;
    let mut user = Command::new(if as_root { "setpriv" } else { &argv[0] });
    if as_root {
        // nobody (65534), as a cluster user runs it; Open MPI wants a writable home and tmp.
        user.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .args(&argv)
            .env("HOME", "/tmp")
            .env("TMPDIR", "/tmp");
    } else {
        user.args(&argv[1..]);
    }
    let out = user.output().unwrap();
    assert!(out.status.success(), "{argv:?}: {}", text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout)
            .matches("rank sees NCCL_DEBUG=INFO")
            .count(),
        2,
        "{}",
        text(&out)
    );
    if as_root {
        // Without --allow-run-as-root Open MPI refuses root, in its words (orte/tools/orterun,
        // help-orterun.txt "orterun:root-not-allowed"), exit 1.
        let out = Command::new(&argv[0]).args(&argv[1..]).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        assert!(
            text(&out).contains("mpirun has detected an attempt to run as root.")
                && text(&out).contains("--allow-run-as-root"),
            "{}",
            text(&out)
        );
    }
}

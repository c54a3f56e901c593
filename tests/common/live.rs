//! A fixture run live against the stand-ins (tests/fake-nvml, tests/fake-cuda,
//! tests/fake-perftest): its tree without `.gpudoctor/` as the root, and beside it the files
//! the stand-ins answer from. Shared by the active-probe tests (`tests/active_probes.rs`,
//! `tests/gpudirect.rs`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Slack on a loaded two-core CI machine on top of every bound.
pub const SLACK: Duration = Duration::from_secs(15);

/// A fixture turned into a live root: its tree without `.gpudoctor/`, and beside it what the
/// stand-ins answer from.
pub struct Live {
    pub scratch: tempfile::TempDir,
    pub root: PathBuf,
    pub nvml: PathBuf,
    pub cuda: PathBuf,
    pub perftest: PathBuf,
    pub kmsg: Option<PathBuf>,
    pub fixture: PathBuf,
}

pub fn live_from(name: &str) -> Live {
    let fixture = super::repo().join("fixtures").join(name);
    let dir = super::tempdir().unwrap();
    let root = super::live_root(&fixture);
    let capture = super::complete(&fixture).join(".gpudoctor");
    let nvml = dir.path().join("nvml.json");
    std::fs::copy(capture.join("nvml.json"), &nvml).unwrap();
    let cuda = dir.path().join("cuda.json");
    if capture.join("cuda.json").is_file() {
        std::fs::copy(capture.join("cuda.json"), &cuda).unwrap();
    }
    let kmsg = capture.join("kmsg.txt").is_file().then(|| {
        let k = dir.path().join("kmsg.txt");
        std::fs::copy(capture.join("kmsg.txt"), &k).unwrap();
        k
    });
    let perftest = dir.path().join("perftest");
    std::fs::create_dir(&perftest).unwrap();
    if let Ok(entries) = std::fs::read_dir(capture.join("gpudirect")) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(hca) = name
                .strip_suffix(".log")
                .filter(|n| !n.ends_with(".server"))
            {
                std::fs::copy(e.path(), perftest.join(format!("{hca}.out"))).unwrap();
            }
        }
    }
    Live {
        scratch: dir,
        root,
        nvml,
        cuda,
        perftest,
        kmsg,
        fixture,
    }
}

impl Live {
    /// The environment every run against the stand-ins needs: where the stand-in NVML, libcuda
    /// and `ib_write_bw` answer from, that `ib_write_bw` first on `PATH`, and no
    /// `CUDA_VISIBLE_DEVICES` from the caller.
    pub fn stand_in_env(&self, cmd: &mut Command) {
        cmd.env(super::FAKE_NVML_JSON, &self.nvml)
            .env(super::FAKE_CUDA_JSON, &self.cuda)
            .env("GPUDOCTOR_FAKE_PERFTEST", &self.perftest)
            .env(
                "PATH",
                format!(
                    "{}:{}",
                    super::fake_perftest_dir().display(),
                    std::env::var("PATH").unwrap_or_default()
                ),
            )
            .env_remove("CUDA_VISIBLE_DEVICES");
    }

    /// Give this run a root of its own (hard links, like the shared one), so the test may add
    /// and remove files in it — never write into the linked ones.
    pub fn own_root(&mut self) {
        let root = self.scratch.path().join("root");
        super::link_tree(&self.fixture, &root);
        std::fs::remove_dir_all(root.join(".gpudoctor")).unwrap();
        self.root = root;
    }

    pub fn command(&self, args: &[&str]) -> Command {
        self.command_with_lib(args, Some(super::fake_cuda_lib()))
    }

    /// The command with `--cuda-lib` naming `cuda_lib`, or without the option (`None`): then
    /// gpudoctor looks for the host's libcuda under the root, as in a Pod without a GPU.
    pub fn command_with_lib(&self, args: &[&str], cuda_lib: Option<&Path>) -> Command {
        let mut cmd = super::scratch::gpudoctor_command();
        cmd.arg("check")
            .arg("--root")
            .arg(&self.root)
            .arg("--nvml-lib")
            .arg(super::fake_nvml_lib())
            .args(["--format", "json", "--skip", "device-plugin"])
            .args(args)
            .env_remove("NO_COLOR");
        self.stand_in_env(&mut cmd);
        if let Some(k) = &self.kmsg {
            cmd.arg("--kernel-log").arg(k);
        }
        if let Some(lib) = cuda_lib {
            cmd.arg("--cuda-lib").arg(lib);
        }
        cmd
    }

    pub fn run(&self, args: &[&str]) -> (Output, Value, Duration) {
        let started = Instant::now();
        let out = self.command(args).output().expect("gpudoctor runs");
        let elapsed = started.elapsed();
        let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "not a report ({e}); stderr:\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (out, report, elapsed)
    }

    /// No process of this run left: nothing whose environment names this run's directory.
    pub fn assert_nothing_left(&self) {
        let mark = self.perftest.display().to_string();
        // Group::finish reaps before gpudoctor exits; allow the kernel a moment to clean up.
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let left = processes_with_env(&mark);
            if left.is_empty() {
                return;
            }
            assert!(Instant::now() < deadline, "processes left behind: {left:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Pids (and command lines) of the processes whose environment contains `mark`.
pub fn processes_with_env(mark: &str) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        let Ok(env) = std::fs::read(e.path().join("environ")) else {
            continue;
        };
        if String::from_utf8_lossy(&env).contains(mark) {
            let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            found.push(format!(
                "{name}: {}",
                String::from_utf8_lossy(&cmdline).replace('\0', " ")
            ));
        }
    }
    found
}

/// Edit a stand-in's answer file (`live.nvml`, `live.cuda`) in place.
pub fn edit_json(path: &Path, edit: impl FnOnce(&mut Value)) {
    let mut value: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    edit(&mut value);
    std::fs::write(path, value.to_string()).unwrap();
}

pub fn check<'a>(report: &'a Value, code: &str) -> &'a Value {
    find_check(report, code).unwrap_or_else(|| panic!("no {code} in the report"))
}

pub fn find_check<'a>(report: &'a Value, code: &str) -> Option<&'a Value> {
    report["layers"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|l| l["checks"].as_array().unwrap())
        .find(|c| c["code"] == code)
}

pub fn findings(report: &Value) -> Vec<String> {
    let mut codes: Vec<String> = report["layers"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|l| l["checks"].as_array().unwrap())
        .filter(|c| matches!(c["status"].as_str(), Some("warn" | "fail" | "error")))
        .map(|c| c["code"].as_str().unwrap().to_string())
        .collect();
    codes.sort();
    codes
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `gpudoctor record` of a live fixture root into `capture`, with the stand-ins.
pub fn record_command(live: &Live, capture: &Path) -> Command {
    let mut cmd = super::scratch::gpudoctor_command();
    cmd.arg("record")
        .arg("--root")
        .arg(&live.root)
        .arg("--out")
        .arg(capture)
        .arg("--nvml-lib")
        .arg(super::fake_nvml_lib())
        .arg("--cuda-lib")
        .arg(super::fake_cuda_lib());
    live.stand_in_env(&mut cmd);
    cmd
}

/// `check --format json --keep-going` of a capture.
pub fn replay_all(capture: &Path) -> Value {
    let replayed = super::gpudoctor(&[
        "check",
        "--root",
        capture.to_str().unwrap(),
        "--format",
        "json",
        "--keep-going",
    ]);
    serde_json::from_slice(&replayed.stdout).unwrap()
}

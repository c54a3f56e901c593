//! What `gpudoctor pairs` takes in and gives back (issue 41): hosts are hosts — an IPv6 address
//! is one host, never cut at its first `:`, and a host holding a comma, whitespace, a leading
//! `-`, `@` or any character no host name holds is a usage error naming it and its hostfile
//! line before any pair runs — and everything that came from the cluster (the launcher's version
//! line, its path, what the pairs printed) reaches the JSON escaped, like every JSON output, and
//! the table escaped like every human output. A stand-in `mpirun` (a shell script, as in
//! tests/pairs.rs) records every call and prints a hostile version line.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Command, Output};

/// Every character no output may carry raw: C0 controls but newline and tab, DEL, C1, the bidi
/// controls, the line separators, and the invisible characters (Unicode Cf and the other
/// default-ignorable code points; `text::sanitize`).
fn forbidden(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{8}' | '\u{b}'..='\u{1f}' | '\u{7f}'..='\u{9f}'
        | '\u{ad}' | '\u{61c}' | '\u{180e}' | '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}'
        | '\u{2060}'..='\u{206f}' | '\u{feff}' | '\u{e0000}'..='\u{e0fff}')
}

/// Planted in the launcher's version line and in its directory's name: C1 (NEL, CSI), DEL,
/// the right-to-left override, a zero-width space, a word joiner, a BOM.
const HOSTILE: &str = "\u{85}\u{9b}2J\u{7f}\u{202e}\u{200b}\u{2060}\u{feff}";

/// A directory holding a stand-in `mpirun` whose `--version` is Open MPI's with [`HOSTILE`] in
/// it, and which for a pair records its `--host` and fails with a NCCL line carrying it.
struct Launcher {
    dir: tempfile::TempDir,
    bin: PathBuf,
}

impl Launcher {
    fn new() -> Launcher {
        let dir = common::tempdir().unwrap();
        let bin = dir.path().join(format!("bin{HOSTILE}"));
        std::fs::create_dir(&bin).unwrap();
        let script = format!(
            r#"#!/bin/sh
HERE=$(dirname "$0")
if [ "$1" = "--version" ]; then
  printf 'mpirun (Open MPI) 4.1.6 {HOSTILE} build\n'
  exit 0
fi
while [ $# -gt 0 ]; do
  case "$1" in
    --host) echo "$2" >> "$HERE/calls"; shift;;
  esac
  shift
done
echo "gpu01: Test NCCL failure common.cu:1057 'unhandled system error {HOSTILE}'"
exit 1
"#
        );
        for name in ["mpirun", "srun"] {
            let path = bin.join(name);
            std::fs::write(&path, &script).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        // An all_reduce_perf that exists: the launcher is given its path, never runs it.
        let tests = dir.path().join("nccl-tests");
        std::fs::create_dir(&tests).unwrap();
        let perf = tests.join("all_reduce_perf");
        std::fs::write(&perf, "#!/bin/sh\nexit 0\n").unwrap();
        std::fs::set_permissions(&perf, std::fs::Permissions::from_mode(0o755)).unwrap();
        Launcher { dir, bin }
    }

    /// `gpudoctor pairs --launcher <this mpirun> ARGS` in a clean environment.
    fn pairs(&self, args: &[&str]) -> Output {
        self.pairs_via("mpirun", args)
    }

    /// The same through the stand-in named `launcher`.
    fn pairs_via(&self, launcher: &str, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_gpudoctor"))
            .arg("pairs")
            .arg("--no-singles")
            .arg("--launcher")
            .arg(self.bin.join(launcher))
            .arg("--nccl-tests-dir")
            .arg(self.dir.path().join("nccl-tests"))
            .args(["--timeout", "20"])
            .args(args)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .output()
            .unwrap()
    }

    /// `--host` of every pair the stand-in ran.
    fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(self.bin.join("calls"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    fn hostfile(&self, text: &str) -> String {
        let path = self.dir.path().join("hostfile");
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    }
}

/// Where `out` carries a [`forbidden`] character raw, on stdout or stderr.
fn raw_in(out: &Output) -> Option<String> {
    for (stream, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        let text = String::from_utf8_lossy(bytes);
        if let Some(c) = text.chars().find(|c| forbidden(*c)) {
            return Some(format!("{stream}: raw {c:?} in {}", text.escape_debug()));
        }
    }
    None
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn the_json_escapes_what_came_from_the_cluster_and_stays_lossless() {
    let launcher = Launcher::new();
    let hostfile = launcher.hostfile("gpu01 slots=8\ngpu02 slots=8\n");
    let out = launcher.pairs(&["--hostfile", &hostfile, "--format", "json"]);
    assert!(
        !launcher.calls().is_empty(),
        "no pair ran: {}",
        stderr(&out)
    );
    if let Some(leak) = raw_in(&out) {
        panic!("pairs --format json: {leak}");
    }
    let text = String::from_utf8_lossy(&out.stdout);
    // Escaped the JSON way, as `check --format json` does (`\u202e`), never dropped.
    assert!(
        text.contains(r"\u0085\u009b2J\u007f\u202e\u200b\u2060\ufeff"),
        "{text}"
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let notes = json["notes"].to_string();
    assert!(
        json["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains(HOSTILE)),
        "the version line reads back as the launcher printed it: {notes}"
    );
    let command = json["pairs"][0]["command"][0].as_str().unwrap();
    assert!(
        command.contains(&format!("bin{HOSTILE}/mpirun")),
        "{command}"
    );

    // The table shows the same escaped the terminal way.
    let out = launcher.pairs(&["--hostfile", &hostfile, "--format", "table"]);
    if let Some(leak) = raw_in(&out) {
        panic!("pairs --format table: {leak}");
    }
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains(r"\u{85}\u{9b}2J\x7f\u{202e}\u{200b}\u{2060}\u{feff}"),
        "{table}"
    );
}

/// `pairs --hostfile` of `text` through the stand-in `via`: a usage error before any pair ran,
/// its message holding each of `says`.
fn refused(launcher: &Launcher, via: &str, text: &str, says: &[&str]) {
    let hostfile = launcher.hostfile(text);
    let out = launcher.pairs_via(via, &["--hostfile", &hostfile, "--format", "json"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{text:?}: {err}");
    assert!(out.stdout.is_empty(), "{text:?}");
    for s in says {
        assert!(err.contains(s), "{text:?}: `{s}` not in: {err}");
    }
    assert!(!err.contains("at least two"), "{text:?}: {err}");
    assert!(raw_in(&out).is_none(), "{text:?}: {err:?}");
    assert!(launcher.calls().is_empty(), "{text:?}: a pair ran");
}

#[test]
fn ipv6_hosts_are_whole_and_refused_where_the_launcher_cannot_take_them() {
    // Before issue 41 these lines collapsed to one host, `fd00`: "pairs needs at least two".
    // Open MPI's --host cuts an entry at its first `:` (dash_host.c), brackets or not: said.
    let launcher = Launcher::new();
    for text in [
        "fd00::1 slots=8\nfd00::2 slots=8\n",
        "[fd00::1]:8\n[fd00::2]:8\n",
        "fd00::1\nfd00::2\n",
    ] {
        refused(&launcher, "mpirun", text, &["`fd00::1`", "IPv6", "--host"]);
    }
    refused(
        &launcher,
        "srun",
        "fd00::1\nfd00::2\n",
        &["`fd00::1`", "node names"],
    );
    let out = launcher.pairs(&["--hosts", "fd00::1,[fd00::2]", "--format", "json"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("IPv6"), "{}", stderr(&out));
}

#[test]
fn a_host_no_launcher_reads_as_one_host_is_a_usage_error_naming_its_line() {
    let launcher = Launcher::new();
    // A comma would add a host to mpirun's --host (`a,b:8,c:8`): the pair credited to a and c
    // would have run on a, b and c.
    refused(
        &launcher,
        "mpirun",
        "gpu01,gpu02 slots=8\ngpu03 slots=8\n",
        &["line 1", "`gpu01,gpu02`", "comma"],
    );
    refused(
        &launcher,
        "mpirun",
        "gpu01\n-np slots=8\n",
        &["line 2", "`-np`", "option"],
    );
    refused(
        &launcher,
        "mpirun",
        "gpu01\nroot@gpu02\n",
        &["line 2", "user@host"],
    );
    refused(
        &launcher,
        "mpirun",
        "gpu01 gpu02\ngpu03\n",
        &["line 1", "one host per line"],
    );
    // A host name with a zero-width space looks like another host: refused, shown escaped.
    refused(
        &launcher,
        "mpirun",
        "gpu01\ngpu\u{200b}02\n",
        &["line 2", r"gpu\u{200b}02"],
    );
    for (hosts, says) in [
        ("gpu01,gpu 02", "whitespace"),
        ("gpu01,root@gpu02", "user@host"),
        ("gpu01,gpu02\u{202e}", "neither a host name"),
    ] {
        let out = launcher.pairs(&["--hosts", hosts, "--format", "json"]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{hosts}: {err}");
        assert!(err.contains(says), "{hosts}: {err}");
        assert!(raw_in(&out).is_none(), "{hosts}: {err:?}");
    }
    let out = launcher.pairs(&["--hosts=-np,gpu02", "--format", "json"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("option"), "{}", stderr(&out));
    assert!(launcher.calls().is_empty());
}

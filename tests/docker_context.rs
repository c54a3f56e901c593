//! `.dockerignore` keeps the Docker build context to what the image build reads: not the
//! fixtures, the tests, `target/` or `.git` (issue 24), yet everything `cargo build --release
//! --locked --bin gpudoctor` and the Dockerfile's `COPY` lines need. Checked by assembling the
//! context as Docker would (every tracked file not under an ignored top-level name) in a
//! temporary directory and asking cargo to load the package from it, offline.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The lines of `.dockerignore`: plain paths, `!path` to take one back in.
fn ignored() -> Vec<String> {
    let text = std::fs::read_to_string(repo().join(".dockerignore")).expect(".dockerignore");
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            assert!(
                !l.trim_start_matches('!').contains(['*', '?', '[', '!']),
                "{l:?}: keep .dockerignore to plain paths, as this test reads it"
            );
            l.to_string()
        })
        .collect()
}

fn tracked_files() -> Vec<String> {
    let out = Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(repo())
        .output()
        .expect("git ls-files");
    assert!(out.status.success(), "git ls-files failed");
    String::from_utf8(out.stdout)
        .expect("utf-8 paths")
        .split('\0')
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect()
}

/// Is `path` sent? The last line that matches it decides (Docker's rule); a line matches the
/// path itself and everything under it.
fn in_context(lines: &[String], path: &str) -> bool {
    let covers = |p: &str| path == p || path.starts_with(&format!("{p}/"));
    lines
        .iter()
        .rev()
        .find_map(|l| match l.strip_prefix('!') {
            Some(back) => covers(back).then_some(true),
            None => covers(l).then_some(false),
        })
        .unwrap_or(true)
}

#[test]
fn the_context_leaves_out_fixtures_tests_build_output_and_history() {
    let ignored = ignored();
    for name in ["fixtures", "tests", "target", ".git"] {
        assert!(
            ignored.iter().any(|i| i == name),
            ".dockerignore must leave out {name}"
        );
    }
    // A Dockerfile-specific ignore file would replace this one under BuildKit.
    assert!(!repo().join("deploy/image/Dockerfile.dockerignore").exists());
}

#[test]
fn the_context_still_holds_what_the_image_build_reads() {
    let ignored = ignored();
    let in_context = |path: &str| in_context(&ignored, path);
    let dockerfile = std::fs::read_to_string(repo().join("deploy/image/Dockerfile")).unwrap();
    // Every COPY from the context (not --from=build) names files that are in it.
    for line in dockerfile.lines().map(str::trim) {
        let Some(args) = line.strip_prefix("COPY ") else {
            continue;
        };
        if args.starts_with("--from") {
            continue;
        }
        let parts: Vec<&str> = args.split_whitespace().collect();
        for src in &parts[..parts.len() - 1] {
            if *src != "." {
                assert!(
                    in_context(src),
                    "the Dockerfile copies {src}, which .dockerignore leaves out"
                );
            }
        }
    }
    // Assemble the context and let cargo load the package from it: the manifest's targets and
    // the lock file must all be there.
    let context = tempfile::tempdir().unwrap();
    let mut copied = 0;
    for file in tracked_files().iter().filter(|f| in_context(f)) {
        let from = repo().join(file);
        let to = context.path().join(file);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        if std::fs::symlink_metadata(&from).is_ok_and(|m| m.is_file()) {
            std::fs::copy(&from, &to).unwrap();
            copied += 1;
        }
    }
    assert!(copied > 10, "only {copied} files in the context");
    assert!(Path::new(&context.path().join("src/main.rs")).exists());
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--offline",
            "--locked",
            "--no-deps",
            "--format-version",
            "1",
        ])
        .current_dir(context.path())
        .output()
        .expect("cargo metadata");
    assert!(
        out.status.success(),
        "cargo cannot load the package from the Docker context: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta = String::from_utf8_lossy(&out.stdout);
    assert!(meta.contains("\"name\":\"gpudoctor\""), "{meta}");
}

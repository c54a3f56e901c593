//! The toolchain the project declares can compile the code (issue 43): `Cargo.toml`'s
//! `rust-version`, the image builder `deploy/image/Dockerfile` starts `FROM` and the README's
//! "Rust toolchain (X or newer)" are one version, and that version is at least what the language
//! features in `src/` and `tests/` need. Standard-library APIs newer than `rust-version` are
//! caught by clippy's `incompatible_msrv` lint (it reads `rust-version`; `.ci`'s
//! `cargo clippy -- -D warnings` makes it an error), so this test also holds that nothing turns
//! that lint off. The image is built per platform (`docker buildx build --platform
//! linux/amd64,linux/arm64`): its base images are multi-architecture tags and nothing in the
//! Dockerfile or the manifests names one architecture's paths.

mod common;

use std::path::Path;

/// (version, what needs it, how it is spotted in a source line): the newest language features
/// the code may use. Let chains (`if let A = a && let B = b`) are stable since Rust 1.88 (the
/// 1.88.0 release notes, rust-lang/rust#132833) and in edition 2024 only; edition 2024 itself
/// needs 1.85.
type Feature = ((u32, u32), &'static str, fn(&str) -> bool);

const FEATURES: &[Feature] = &[
    ((1, 85), "edition 2024", |_| false),
    ((1, 88), "let chains (`&& let`)", |line| {
        let code = line.split("//").next().unwrap_or_default();
        code.contains("&& let ") || code.trim_start().starts_with("&& let ")
    }),
];

fn version(text: &str) -> (u32, u32) {
    let mut parts = text.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `rust-version` from Cargo.toml's `[package]`.
fn declared() -> String {
    let manifest = std::fs::read_to_string(common::repo().join("Cargo.toml")).unwrap();
    let value: toml::Table = toml::from_str(&manifest).unwrap();
    value["package"]["rust-version"]
        .as_str()
        .expect("Cargo.toml [package] rust-version")
        .to_string()
}

/// The builder image's tag version: `ARG BUILDER=rust:1.88-bookworm` → "1.88".
fn dockerfile_builder() -> String {
    let text = std::fs::read_to_string(common::repo().join("deploy/image/Dockerfile")).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with("ARG BUILDER="))
        .expect("the Dockerfile's ARG BUILDER=rust:<version>-<distro>");
    let tag = line
        .trim_start_matches("ARG BUILDER=")
        .strip_prefix("rust:")
        .expect("the builder is the official rust image");
    tag.split('-').next().unwrap().to_string()
}

#[test]
fn rust_version_dockerfile_and_readme_name_one_toolchain_that_compiles_the_code() {
    let declared = declared();
    assert_eq!(
        dockerfile_builder(),
        declared,
        "deploy/image/Dockerfile builds with another toolchain than Cargo.toml's rust-version"
    );
    let readme = std::fs::read_to_string(common::repo().join("README.md")).unwrap();
    assert!(
        readme.contains(&format!("Rust toolchain ({declared} or newer)")),
        "README.md must say \"Rust toolchain ({declared} or newer)\""
    );
    // Every toolchain the docs suggest for the builder is the same one.
    for doc in ["docs/deploy.md", "deploy/image/Dockerfile"] {
        let text = std::fs::read_to_string(common::repo().join(doc)).unwrap();
        for (at, _) in text.match_indices("rust:") {
            let tag: String = text[at + 5..]
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            if !tag.is_empty() {
                assert_eq!(tag, declared, "{doc} names rust:{tag}");
            }
        }
    }

    let mut files = Vec::new();
    rust_files(&common::repo().join("src"), &mut files);
    rust_files(&common::repo().join("tests"), &mut files);
    let mut needed = ((1, 85), "edition 2024".to_string());
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            for (min, what, uses) in FEATURES {
                if uses(line) && *min > needed.0 {
                    needed = (*min, format!("{what}, e.g. {}:{}", file.display(), n + 1));
                }
            }
        }
    }
    assert!(
        version(&declared) >= needed.0,
        "rust-version {declared} cannot compile the code: {} needs {}.{}",
        needed.1,
        needed.0.0,
        needed.0.1
    );
}

/// The spotter finds what it is meant to and nothing in comments.
#[test]
fn the_let_chain_spotter_sees_let_chains_only() {
    let spot = FEATURES[1].2;
    assert!(spot("        if let Some(a) = x && let Some(b) = y {"));
    assert!(spot("            && let Ok(v) = parse(t)"));
    assert!(!spot("        if let Some(a) = x {"));
    assert!(!spot("    // a && let chain in a comment"));
    assert!(!spot("        if a && b {"));
}

/// clippy's `incompatible_msrv` is what catches a standard-library API newer than
/// `rust-version`; allowing it anywhere would let the declared toolchain drift again.
#[test]
fn nothing_turns_off_the_msrv_lint() {
    let mut files = Vec::new();
    rust_files(&common::repo().join("src"), &mut files);
    rust_files(&common::repo().join("tests"), &mut files);
    let this = file!().replace('\\', "/");
    for file in files {
        if file.ends_with(Path::new(&this).file_name().unwrap()) {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(
            !text.contains("incompatible_msrv"),
            "{} allows clippy::incompatible_msrv",
            file.display()
        );
    }
    let manifest = std::fs::read_to_string(common::repo().join("Cargo.toml")).unwrap();
    assert!(!manifest.contains("incompatible_msrv"));
}

/// Built per platform: the base images are the official multi-architecture tags (no `amd64/`
/// or `arm64v8/` repository, no `--platform` pinned in a FROM line) and no file the image or
/// the manifests use names one architecture's library directory or target triple.
#[test]
fn the_image_and_manifests_assume_no_architecture() {
    let repo = common::repo();
    let dockerfile = std::fs::read_to_string(repo.join("deploy/image/Dockerfile")).unwrap();
    for line in dockerfile.lines().filter(|l| !l.starts_with('#')) {
        if let Some(from) = line.strip_prefix("FROM ") {
            assert!(
                !from.contains("--platform=linux/"),
                "a FROM pinned to one platform: {line}"
            );
        }
        if let Some(image) = line
            .strip_prefix("ARG BUILDER=")
            .or(line.strip_prefix("ARG RUNTIME="))
        {
            assert!(
                !image.contains('/'),
                "{image}: use the official multi-arch image, not an architecture's repository"
            );
        }
    }
    let mut files = vec![repo.join("deploy/image/Dockerfile")];
    fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else {
                out.push(path);
            }
        }
    }
    walk(&repo.join("deploy"), &mut files);
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for arch in ["x86_64", "amd64", "aarch64", "arm64"] {
            for line in text.lines().filter(|l| !l.trim_start().starts_with('#')) {
                assert!(
                    !line.contains(arch),
                    "{}: names {arch}: {line}",
                    file.display()
                );
            }
        }
    }
}

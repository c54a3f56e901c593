//! The disk checks on small captures: figures from `.gpudoctor/statvfs.json`, directories and
//! configs as a node has them.

use super::*;
use crate::source::{ReplaySource, Source};

/// A capture with a containerd config (root `/data/containerd` when `root` is given), the
/// kubelet's root, /var/log, the kubelet config `kubelet` (if any) and `stats`.
fn node(root: Option<&str>, kubelet: Option<&str>, stats: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let write = |rel: &str, text: &str| {
        let path = dir.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(".gpudoctor/manifest.json", r#"{"format_version": 1}"#);
    let config = match root {
        Some(r) => format!("version = 2\nroot = \"{r}\"\n"),
        None => "version = 2\n".to_string(),
    };
    write("etc/containerd/config.toml", &config);
    let runtime_dir = root
        .unwrap_or("/var/lib/containerd")
        .trim_start_matches('/');
    std::fs::create_dir_all(dir.path().join(runtime_dir)).unwrap();
    std::fs::create_dir_all(dir.path().join("var/lib/kubelet")).unwrap();
    std::fs::create_dir_all(dir.path().join("var/log")).unwrap();
    if let Some(k) = kubelet {
        write("var/lib/kubelet/config.yaml", k);
    }
    if !stats.is_empty() {
        write(".gpudoctor/statvfs.json", stats);
    }
    dir
}

fn stat(dev: u64, avail_pct: u64, inodes_free_pct: u64) -> String {
    format!(
        r#"{{"dev": {dev}, "fragment_size": 4096, "blocks": 1000, "blocks_available": {}, "files": 1000, "files_free": {}}}"#,
        avail_pct * 10,
        inodes_free_pct * 10
    )
}

fn run(dir: &tempfile::TempDir, resource: Resource) -> Outcome {
    let source = ReplaySource::open(dir.path()).unwrap();
    let ctx = Context::new(&source);
    judge(&ctx, resource)
}

#[test]
fn roomy_filesystems_pass_and_shared_ones_are_judged_once() {
    let stats = format!(
        r#"{{"var/lib/containerd": {}, "var/lib/kubelet": {}, "var/log": {}}}"#,
        stat(1, 60, 90),
        stat(1, 60, 90),
        stat(2, 80, 90)
    );
    let dir = node(None, None, &stats);
    let out = run(&dir, Resource::Space);
    assert_eq!(out.status, Status::Pass, "{out:?}");
    assert!(out.summary.contains("2 filesystem(s)"), "{}", out.summary);
    assert!(
        out.summary
            .contains("/var/lib/containerd, /var/lib/kubelet 60%"),
        "{}",
        out.summary
    );
    assert_eq!(run(&dir, Resource::Inodes).status, Status::Pass);
}

#[test]
fn imagefs_at_its_threshold_fails_and_nodefs_below_twice_warns() {
    // The runtime's root on its own filesystem at 15% (imagefs.available<15%): evicting.
    let stats = format!(
        r#"{{"data/containerd": {}, "var/lib/kubelet": {}, "var/log": {}}}"#,
        stat(1, 15, 90),
        stat(2, 60, 90),
        stat(2, 60, 90)
    );
    let dir = node(Some("/data/containerd"), None, &stats);
    let out = run(&dir, Resource::Space);
    assert_eq!(out.status, Status::Fail, "{out:?}");
    assert!(out.summary.contains("/data/containerd"), "{}", out.summary);
    let expected = out.evidence[0].expected.clone().unwrap_or_default();
    assert!(
        expected.contains("imagefs.available<15% (kubelet default)"),
        "{expected}"
    );
    assert!(
        out.evidence[0]
            .source
            .contains("root in /etc/containerd/config.toml"),
        "{:?}",
        out.evidence[0]
    );

    // The kubelet's root at 19% (nodefs: threshold 10%, warn below 20%).
    let stats = format!(
        r#"{{"var/lib/containerd": {}, "var/lib/kubelet": {}, "var/log": {}}}"#,
        stat(1, 60, 90),
        stat(2, 19, 90),
        stat(3, 60, 90)
    );
    let out = run(&node(None, None, &stats), Resource::Space);
    assert_eq!(out.status, Status::Warn, "{out:?}");
    assert!(
        out.summary
            .contains("/var/lib/kubelet (kubelet root) 19% space free"),
        "{}",
        out.summary
    );
}

#[test]
fn one_filesystem_for_all_is_judged_by_the_strictest_signal() {
    // 14% is above nodefs' 10% but at or below imagefs' 15%: the runtime's root is on it.
    let s = stat(7, 14, 90);
    let stats = format!(r#"{{"var/lib/containerd": {s}, "var/lib/kubelet": {s}, "var/log": {s}}}"#);
    let out = run(&node(None, None, &stats), Resource::Space);
    assert_eq!(out.status, Status::Fail, "{out:?}");
}

#[test]
fn inodes_fail_at_five_percent() {
    let stats = format!(
        r#"{{"var/lib/containerd": {}, "var/lib/kubelet": {}, "var/log": {}}}"#,
        stat(1, 60, 5),
        stat(2, 60, 9),
        stat(3, 60, 50)
    );
    let out = run(&node(None, None, &stats), Resource::Inodes);
    assert_eq!(out.status, Status::Fail, "{out:?}");
    assert!(
        out.summary.contains("/var/lib/containerd"),
        "{}",
        out.summary
    );
    assert!(out.summary.contains("/var/lib/kubelet"), "{}", out.summary);
    assert_eq!(out.evidence.len(), 2);
}

#[test]
fn the_kubelets_eviction_hard_sets_the_thresholds() {
    let kubelet = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nevictionHard:\n  nodefs.available: 30%\n  imagefs.available: 1Gi\n";
    let stats = format!(
        r#"{{"var/lib/containerd": {}, "var/lib/kubelet": {}, "var/log": {}}}"#,
        stat(1, 20, 90),
        stat(2, 25, 90),
        stat(2, 25, 90)
    );
    let out = run(&node(None, Some(kubelet), &stats), Resource::Space);
    // nodefs at 25% <= 30%: fails; imagefs 20% of 3.9 MiB is above 1Gi... which is all of it.
    assert_eq!(out.status, Status::Fail, "{out:?}");
    let said: Vec<String> = out
        .evidence
        .iter()
        .filter_map(|e| e.expected.clone())
        .collect();
    assert!(
        said.iter()
            .any(|e| e.contains("nodefs.available<30% (evictionHard)")),
        "{said:?}"
    );
    assert!(
        said.iter()
            .any(|e| e.contains("imagefs.available<1Gi (evictionHard)")),
        "{said:?}"
    );
    // Inodes: evictionHard sets no inodesFree, so the kubelet's is 0 — 1% free passes.
    let stats = format!(
        r#"{{"var/lib/containerd": {}, "var/lib/kubelet": {}, "var/log": {}}}"#,
        stat(1, 60, 1),
        stat(2, 60, 1),
        stat(2, 60, 1)
    );
    let out = run(&node(None, Some(kubelet), &stats), Resource::Inodes);
    assert_eq!(out.status, Status::Pass, "{out:?}");
}

#[test]
fn a_capture_without_figures_skips_and_a_failed_statvfs_is_an_error() {
    let out = run(&node(None, None, ""), Resource::Space);
    assert_eq!(out.status, Status::Skip, "{out:?}");
    assert!(out.summary.contains("re-record"), "{}", out.summary);

    let stats = format!(
        r#"{{"var/lib/containerd": {}, "var/lib/kubelet": {{"error": "Permission denied (os error 13)"}}, "var/log": {}}}"#,
        stat(1, 60, 90),
        stat(1, 60, 90)
    );
    let out = run(&node(None, None, &stats), Resource::Space);
    assert_eq!(out.status, Status::Error, "{out:?}");
    assert!(out.summary.contains("/var/lib/kubelet"), "{}", out.summary);

    let out = run(&node(None, None, "{not json"), Resource::Space);
    assert_eq!(out.status, Status::Error, "{out:?}");
}

#[test]
fn btrfs_without_an_inode_count_is_not_judged() {
    let s = r#"{"dev": 1, "fragment_size": 4096, "blocks": 1000, "blocks_available": 900, "files": 0, "files_free": 0}"#;
    let stats = format!(r#"{{"var/lib/containerd": {s}, "var/lib/kubelet": {s}, "var/log": {s}}}"#);
    let out = run(&node(None, None, &stats), Resource::Inodes);
    assert_eq!(out.status, Status::Pass, "{out:?}");
    assert!(out.summary.contains("no inode count"), "{}", out.summary);
}

#[test]
fn live_statvfs_reads_the_directory_under_the_root() {
    // The live source asks the kernel under a node's root (`/` here); the figures are this
    // machine's, the shape is checked.
    use crate::answers::fs_stat::StatAnswer;
    let source = crate::source::HostSource::new("/", Default::default());
    let Some(StatAnswer::Stat(stat)) = source.fs_stat("tmp") else {
        panic!("no figures for /tmp")
    };
    assert!(stat.blocks > 0 && stat.fragment_size > 0);
    assert_eq!(
        source.fs_stat("no/such/dir/here"),
        Some(StatAnswer::Missing { missing: true })
    );
    // A plain directory is a copy, not a node: no figures.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("var/log")).unwrap();
    let copy = crate::source::HostSource::new(dir.path(), Default::default());
    assert_eq!(copy.fs_stat("var/log"), None);
    // The rooted reader refuses a link out of the root, never following it to this
    // machine's own directory.
    std::os::unix::fs::symlink("/etc", dir.path().join("var/etc")).unwrap();
    assert!(copy.fs().statvfs("var/etc").is_err());
    assert!(copy.fs().statvfs("var/log").is_ok());
}

//! Tests of the NCCL probe: finding binaries, sweep arguments, launcher splitting, the child's
//! environment, reading user logs and captures with their run records, and the transcript.

use super::run::Transcript;
use super::*;

#[test]
fn launcher_is_split_like_a_shell_without_expansion() {
    assert_eq!(
        split_command(
            "mpirun -np 16 -H a:8,b:8 -x NCCL_IB_HCA='mlx5_0 mlx5_1' --bind-to \"numa\" $HOME"
        )
        .unwrap(),
        vec![
            "mpirun",
            "-np",
            "16",
            "-H",
            "a:8,b:8",
            "-x",
            "NCCL_IB_HCA=mlx5_0 mlx5_1",
            "--bind-to",
            "numa",
            "$HOME"
        ]
    );
    assert!(split_command("mpirun 'oops").is_err());
    assert!(split_command("   ").unwrap().is_empty());
}

#[test]
fn arguments_follow_the_sweep_and_gpu_count() {
    assert_eq!(test_args(true, 8).join(" "), "-b 1G -e 8G -f 2 -g 8 -c 1");
    assert_eq!(test_args(false, 1).join(" "), "-b 8 -e 8G -f 2 -g 1 -c 1");
    assert_eq!(binary_name("all_gather"), "all_gather_perf");
    assert_eq!(binary_name("all_gather_perf"), "all_gather_perf");
}

#[test]
fn environment_forces_info_and_reports_the_rest() {
    let env = child_env([
        ("NCCL_DEBUG".to_string(), "WARN".to_string()),
        ("NCCL_DEBUG_FILE".to_string(), "/tmp/nccl.%h.%p".to_string()),
        ("NCCL_IB_HCA".to_string(), "mlx5_0".to_string()),
        ("PATH".to_string(), "/usr/bin".to_string()),
    ]);
    assert_eq!(
        env.changes,
        vec![
            ("NCCL_DEBUG".to_string(), Some("INFO".to_string())),
            ("NCCL_DEBUG_FILE".to_string(), None)
        ]
    );
    assert_eq!(
        env.inherited.keys().collect::<Vec<_>>(),
        vec!["NCCL_IB_HCA"]
    );
    assert!(env.changed[0].contains("was WARN"));
    let trace = child_env([("NCCL_DEBUG".to_string(), "TRACE".to_string())]);
    assert!(trace.changes.is_empty());
    assert_eq!(trace.inherited["NCCL_DEBUG"], "TRACE");
}

#[test]
fn binary_search_reports_where_it_looked() {
    let dir = tempfile::tempdir().unwrap();
    let err = find_binary("all_reduce", None, Some("/nonexistent-a:/nonexistent-b")).unwrap_err();
    assert_eq!(err[0], "PATH=/nonexistent-a:/nonexistent-b");
    assert!(err.contains(&"/opt/nccl-tests/build".to_string()));
    // A directory given is the only place looked: a wrong --nccl-tests-dir never runs
    // another build found on PATH.
    let on_path = tempfile::tempdir().unwrap();
    let elsewhere = on_path.path().join("all_reduce_perf");
    std::fs::write(&elsewhere, "#!/bin/sh\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&elsewhere, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path_var = on_path.path().display().to_string();
    assert_eq!(
        find_binary("all_reduce", None, Some(&path_var)).unwrap(),
        elsewhere
    );
    let err = find_binary("all_reduce", Some(dir.path()), Some(&path_var)).unwrap_err();
    assert_eq!(
        err,
        [
            dir.path().display().to_string(),
            dir.path().join("build").display().to_string()
        ]
    );

    let build = dir.path().join("build");
    std::fs::create_dir(&build).unwrap();
    let bin = build.join("all_reduce_perf_mpi");
    std::fs::write(&bin, "#!/bin/sh\n").unwrap();
    // Not executable yet: not found.
    assert!(find_binary("all_reduce", Some(dir.path()), None).is_err());
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(
        find_binary("all_reduce", Some(dir.path()), None).unwrap(),
        bin
    );
}

#[test]
fn capture_logs_stay_inside_the_root() {
    let dir = tempfile::tempdir().unwrap();
    let nccl = dir.path().join(NCCL_DIR);
    std::fs::create_dir_all(&nccl).unwrap();
    let fs = RootedFs::new(dir.path());
    assert!(matches!(read_capture(&fs), NcclProbe::NotRequested { .. }));
    std::os::unix::fs::symlink("/etc/hostname", nccl.join("escape.log")).unwrap();
    match read_capture(&fs) {
        NcclProbe::Unavailable {
            origin, message, ..
        } => {
            assert_eq!(origin, ".gpudoctor/nccl/escape.log");
            assert!(message.contains("leaves the root"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    std::fs::remove_file(nccl.join("escape.log")).unwrap();
    std::fs::write(nccl.join("a.log"), "# Avg bus bandwidth    : 1.5 \n").unwrap();
    std::fs::write(
        nccl.join("a.json"),
        r#"{"exit": {"signal": 15}, "timed_out": true}"#,
    )
    .unwrap();
    let NcclProbe::Runs(runs) = read_capture(&fs) else {
        panic!("runs expected");
    };
    assert_eq!(runs[0].name, "a");
    assert_eq!(runs[0].log.avg_busbw.as_ref().unwrap().0, 1.5);
    let meta = runs[0].meta.as_ref().unwrap();
    assert_eq!(meta.exit, Some(RunExit::Signal(15)));
    assert!(meta.timed_out);
}

#[test]
fn transcript_keeps_head_and_tail() {
    let mut t = Transcript::new(64);
    for i in 0..100 {
        t.push(format!("line {i:03}").as_bytes());
    }
    let text = t.finish();
    assert!(text.starts_with("line 000\n"));
    assert!(text.ends_with("line 099\n"));
    assert!(text.contains("omitted here"));
    assert!(text.len() < 200);
}

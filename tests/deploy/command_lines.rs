//! The command lines the deployment runs: the entry script's in each mode (with the profile
//! ConfigMap and the DaemonSet's loop) and the MPIJob launchers', each one gpudoctor accepts.

use super::*;

#[test]
fn the_mpijob_launcher_runs_a_command_line_gpudoctor_accepts() {
    use clap::Parser;
    let docs = documents(&common::repo().join("deploy/mpijob.yaml"));
    let launcher =
        &docs[0]["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0];
    let command: Vec<&str> = launcher["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(command[0].ends_with("/gpudoctor"), "{command:?}");
    let cli = gpudoctor::cli::Cli::try_parse_from(&command)
        .unwrap_or_else(|e| panic!("deploy/mpijob.yaml launcher: {e}"));
    match cli.command {
        gpudoctor::cli::Command::Check(args) => {
            assert_eq!(args.only, [gpudoctor::report::Layer::Nccl]);
        }
        other => panic!("the launcher runs {other:?}, not check"),
    }
}

/// A stand-in for the gpudoctor binary in `dir` that prints its arguments, one a line.
fn print_args(dir: &Path) -> PathBuf {
    let echo = dir.join("print-args");
    std::fs::write(
        &echo,
        "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done\n",
    )
    .unwrap();
    std::fs::set_permissions(&echo, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    echo
}

#[test]
fn the_entry_script_builds_command_lines_gpudoctor_accepts() {
    use clap::Parser;
    let script = common::repo().join("deploy/image/gpudoctor-node.sh");
    let tmp = common::tempdir().unwrap();
    let nvml = "/host/opt/nvidia/lib/libnvidia-ml.so.1";
    let echo = print_args(tmp.path());
    for (mode, extra, env) in [
        ("once", vec!["--keep-going", "--format", "markdown"], vec![]),
        (
            "npd",
            vec![],
            vec![
                ("GPUDOCTOR_ARGS", "--skip nccl"),
                ("GPUDOCTOR_REPORT", "/var/lib/gpudoctor/npd-last.json"),
            ],
        ),
        (
            "once",
            vec![],
            vec![
                (
                    "GPUDOCTOR_ARGS",
                    "--keep-going --skip nccl --state-dir /var/lib/gpudoctor",
                ),
                (
                    "GPUDOCTOR_TEXTFILE_DIR",
                    "/var/lib/node_exporter/textfile_collector",
                ),
                ("GPUDOCTOR_NVML_LIB", nvml),
            ],
        ),
    ] {
        let named = env.iter().any(|(k, _)| *k == "GPUDOCTOR_NVML_LIB");
        let out = std::process::Command::new("sh")
            .arg(&script)
            .arg(mode)
            .args(&extra)
            .env("GPUDOCTOR_ROOT", tmp.path())
            .env("GPUDOCTOR_BIN", &echo)
            .envs(env)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let printed = String::from_utf8(out.stdout).unwrap();
        let argv: Vec<&str> = printed.lines().collect();
        assert_eq!(argv.first(), Some(&"check"), "{printed}");
        // The binary finds the host's NVML under the root itself; the script passes
        // --nvml-lib only when told where it is.
        assert_eq!(printed.contains("--nvml-lib"), named, "{printed}");
        assert_eq!(printed.contains(nvml), named, "{printed}");
        let mut full = vec!["gpudoctor"];
        full.extend(&argv);
        gpudoctor::cli::Cli::try_parse_from(&full)
            .unwrap_or_else(|e| panic!("{mode}: {full:?}: {e}"));
    }

    // Every NPD rule's arguments: `npd CONDITION` checks and answers for it; `npd-saved
    // CONDITION` renders the report the first rule saved (deploy/npd/gpudoctor-plugin-monitor.json).
    let report = "/var/lib/gpudoctor/npd-last.json";
    for class in gpudoctor::render::npd_conditions::Condition::ALL {
        for mode in ["npd", "npd-saved"] {
            let out = std::process::Command::new("sh")
                .arg(&script)
                .args([mode, class.id()])
                .env("GPUDOCTOR_ROOT", tmp.path())
                .env("GPUDOCTOR_BIN", &echo)
                .env("GPUDOCTOR_REPORT", report)
                .output()
                .unwrap();
            assert!(out.status.success(), "{mode} {}", class.id());
            let printed = String::from_utf8(out.stdout).unwrap();
            let argv: Vec<&str> = printed.lines().collect();
            let want = if mode == "npd" { "check" } else { "render" };
            assert_eq!(argv.first(), Some(&want), "{printed}");
            let at = argv.iter().position(|a| *a == "--npd-condition").unwrap();
            assert_eq!(argv[at + 1], class.id(), "{printed}");
            assert!(argv.contains(&report), "{printed}");
            let mut full = vec!["gpudoctor"];
            full.extend(&argv);
            gpudoctor::cli::Cli::try_parse_from(&full)
                .unwrap_or_else(|e| panic!("{mode}: {full:?}: {e}"));
        }
    }
    // npd-saved without a report to read is NPD's "unknown", with a line saying why.
    let out = std::process::Command::new("sh")
        .arg(&script)
        .args(["npd-saved", "gpu-driver"])
        .env("GPUDOCTOR_BIN", &echo)
        .env_remove("GPUDOCTOR_REPORT")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stdout).contains("GPUDOCTOR_REPORT"));
}

/// The profile comes from one ConfigMap (issue 26): `gpudoctor-profile` in the kustomized
/// daemonset.yaml, empty by default (chosen from the GPUs), mounted read-only and optional by
/// every Pod that runs gpudoctor; the entry script makes `--profile` of it — a profile file
/// first, else a built-in name — and gpudoctor accepts the command line.
#[test]
fn the_profile_comes_from_one_configmap_every_gpudoctor_pod_mounts() {
    let deploy = common::repo().join("deploy");
    let configmap = documents(&deploy.join("base/daemonset.yaml"))
        .into_iter()
        .find(|d| d["kind"] == "ConfigMap" && d["metadata"]["name"] == "gpudoctor-profile")
        .expect("the gpudoctor-profile ConfigMap in daemonset.yaml");
    assert_eq!(
        configmap["data"]["name"], "",
        "chosen from the GPUs by default"
    );
    assert_eq!(configmap["data"]["profile.toml"], "");
    for file in [
        "base/daemonset.yaml",
        "job.yaml",
        "npd/node-problem-detector.yaml",
    ] {
        let docs = documents(&deploy.join(file));
        let spec = docs
            .iter()
            .map(|d| &d["spec"]["template"]["spec"])
            .find(|t| t.is_object())
            .unwrap_or_else(|| panic!("{file}: a Pod template"));
        let volume = spec["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == "profile")
            .unwrap_or_else(|| panic!("{file}: no profile volume"));
        assert_eq!(volume["configMap"]["name"], "gpudoctor-profile", "{file}");
        assert_eq!(volume["configMap"]["optional"], true, "{file}");
        let runs_gpudoctor = spec["containers"].as_array().unwrap().iter().filter(|c| {
            c.to_string().contains("gpudoctor-node")
                || c["volumeMounts"].to_string().contains("/host/sys")
        });
        for container in runs_gpudoctor {
            let mount = container["volumeMounts"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["name"] == "profile")
                .unwrap_or_else(|| {
                    panic!("{file}: {} does not mount the profile", container["name"])
                });
            assert_eq!(mount["mountPath"], "/etc/gpudoctor/profile", "{file}");
            assert_eq!(mount["readOnly"], true, "{file}");
        }
    }

    use clap::Parser;
    let script = deploy.join("image/gpudoctor-node.sh");
    let tmp = common::tempdir().unwrap();
    let echo = print_args(tmp.path());
    let dir = tmp.path().join("profile");
    std::fs::create_dir(&dir).unwrap();
    let file = dir.join("profile.toml");
    let argv_with = |name: &str, toml: &str| {
        std::fs::write(dir.join("name"), name).unwrap();
        std::fs::write(&file, toml).unwrap();
        let out = std::process::Command::new("sh")
            .arg(&script)
            .arg("once")
            .env("GPUDOCTOR_ROOT", tmp.path())
            .env("GPUDOCTOR_BIN", &echo)
            .env("GPUDOCTOR_PROFILE_DIR", &dir)
            .output()
            .unwrap();
        let argv: Vec<String> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(String::from)
            .collect();
        let mut full = vec!["gpudoctor".to_string()];
        full.extend(argv.iter().cloned());
        gpudoctor::cli::Cli::try_parse_from(&full).unwrap_or_else(|e| panic!("{full:?}: {e}"));
        argv.iter()
            .position(|a| a == "--profile")
            .map(|at| argv[at + 1].clone())
    };
    // The ConfigMap as shipped: no --profile, gpudoctor chooses.
    assert_eq!(argv_with("", ""), None);
    assert_eq!(
        argv_with("hgx-h100-roce\n", ""),
        Some("hgx-h100-roce".into())
    );
    let lab = "name = \"lab-node\"\ngpu_count = 8\n";
    assert_eq!(
        argv_with("hgx-h100", lab),
        Some(file.display().to_string()),
        "a profile file wins over a name"
    );
}

/// The DaemonSet's log (issue 26): the first run's report in full, then only what changed
/// between one run and the next (`gpudoctor diff` of the saved reports), and one line per run
/// on stderr — not the same table every five minutes. Runs the real binary through a wrapper
/// that points the root at the healthy fixture twice, then at one with a double-bit ECC XID,
/// then stops the loop.
#[test]
fn the_daemonset_logs_the_first_report_then_only_what_changed() {
    let tmp = common::tempdir().unwrap();
    let root = tmp.path().join("root");
    let fixtures = common::repo().join("fixtures");
    let wrapper = tmp.path().join("gpudoctor");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nif [ \"$1\" = check ]; then\n  n=$(cat {runs} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {runs}\n  case $n in\n    1|2) ln -sfn {healthy} {root} ;;\n    3) ln -sfn {xid} {root} ;;\n    *) kill -TERM $PPID; exit 0 ;;\n  esac\nfi\nexec {real} \"$@\"\n",
            runs = tmp.path().join("runs").display(),
            healthy = fixtures.join("hgx-h100-healthy").display(),
            // An overlay fixture, composed: its base is found beside it, not beside `root`.
            xid = common::complete(&fixtures.join("h100-xid48-dbe")).display(),
            root = root.display(),
            real = env!("CARGO_BIN_EXE_gpudoctor"),
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let out = std::process::Command::new("sh")
        .arg(common::repo().join("deploy/image/gpudoctor-node.sh"))
        .arg("loop")
        .env("GPUDOCTOR_ROOT", &root)
        .env("GPUDOCTOR_BIN", &wrapper)
        .env("GPUDOCTOR_INTERVAL", "0")
        .env("GPUDOCTOR_REPORT", tmp.path().join("last.json"))
        .env("GPUDOCTOR_PROFILE_DIR", tmp.path().join("no-profile"))
        .env_remove("GPUDOCTOR_TEXTFILE_DIR")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "the loop ends on SIGTERM");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    let runs: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("gpudoctor-node: "))
        .collect();
    assert_eq!(runs.len(), 3, "one line per run:\n{stderr}");
    for (line, code) in runs.iter().zip(["exit 0;", "exit 0;", "exit 1;"]) {
        assert!(
            line.contains(code) && line.contains("next run in 0s"),
            "{line}\n{stderr}"
        );
    }
    // The first report whole (the table names every layer), once.
    assert_eq!(
        stdout.matches("does the host see healthy GPUs?").count(),
        1,
        "{stdout}"
    );
    // The unchanged second run prints nothing; the third, what changed and only that.
    assert_eq!(stdout.matches("gpudoctor diff").count(), 1, "{stdout}");
    let diff = stdout.split("gpudoctor diff").nth(1).unwrap();
    assert!(
        diff.contains("verdict driver.xid_events: skip → fail"),
        "{diff}"
    );
    assert!(!diff.contains("does the host see healthy GPUs?"), "{diff}");
}

/// deploy/mpijob-pairs.yaml: its launcher runs `gpudoctor pairs` with arguments it accepts, and
/// the hostfile the MPI Operator writes (`<job>-worker-N.<job>.<namespace>.svc slots=8`, v2beta1)
/// gives one host per worker.
#[test]
fn the_pairs_mpijob_launcher_runs_pairs_over_the_operators_hostfile() {
    use clap::Parser;
    let docs = documents(&common::repo().join("deploy/mpijob-pairs.yaml"));
    let spec = &docs[0]["spec"];
    let workers = spec["mpiReplicaSpecs"]["Worker"]["replicas"]
        .as_u64()
        .unwrap();
    let slots = spec["slotsPerWorker"].as_u64().unwrap();
    let launcher = &spec["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0];
    let command: Vec<String> = launcher["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    let cli = gpudoctor::cli::Cli::try_parse_from(&command)
        .unwrap_or_else(|e| panic!("deploy/mpijob-pairs.yaml launcher: {e}"));
    let gpudoctor::cli::Command::Pairs(mut args) = cli.command else {
        panic!("the launcher does not run pairs: {command:?}");
    };
    assert_eq!(
        args.hostfile.as_deref(),
        Some(Path::new("/etc/mpi/hostfile"))
    );
    assert_eq!(u64::from(args.gpus_per_node.unwrap()), slots);
    let dir = common::tempdir().unwrap();
    let hostfile = dir.path().join("hostfile");
    let lines: String = (0..workers)
        .map(|i| {
            format!("gpudoctor-pairs-worker-{i}.gpudoctor-pairs.gpudoctor.svc slots={slots}\n")
        })
        .collect();
    std::fs::write(&hostfile, lines).unwrap();
    args.hostfile = Some(hostfile);
    args.nccl_tests_dir = None; // the image's path; not on this machine
    let options = args.options(&[]).unwrap();
    assert_eq!(options.hosts.len() as u64, workers);
    let argv = options
        .plan
        .argv(&options.hosts[0], &options.hosts[1])
        .join(" ");
    assert!(
        argv.starts_with(&format!(
            "mpirun -np {} --host gpudoctor-pairs-worker-0.gpudoctor-pairs.gpudoctor.svc:{slots},",
            2 * slots
        )),
        "{argv}"
    );
    assert!(
        argv.contains("--allow-run-as-root") && argv.ends_with("-g 1 -c 1"),
        "{argv}"
    );
}

//! Worst cases, at sizes a reader can hand over (up to the 8 MiB read cap): megabytes built to
//! hit each parser's worst case parse in bounded time.

use super::*;

/// The worst case being parsed now, named when the test times out.
static CURRENT: std::sync::Mutex<&str> = std::sync::Mutex::new("");

fn timed(name: &'static str, input: &str, parse: impl FnOnce(&str)) {
    *CURRENT.lock().unwrap() = name;
    let started = Instant::now();
    parse(input);
    let took = started.elapsed();
    eprintln!("{name}: {} bytes in {took:?}", input.len());
    assert!(
        took < Duration::from_secs(10),
        "{name}: {} bytes took {took:?}",
        input.len()
    );
}

#[test]
fn big_inputs_parse_in_bounded_time() {
    let (tx, rx) = mpsc::channel();
    thread::Builder::new()
        .stack_size(8 << 20)
        .spawn(move || {
            big_inputs();
            let _ = tx.send(());
        })
        .unwrap();
    match rx.recv_timeout(Duration::from_secs(240)) {
        Ok(()) => {}
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            panic!(
                "{}: a big input made the parser panic",
                CURRENT.lock().unwrap()
            )
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!(
                "{}: a big input made the parser loop",
                CURRENT.lock().unwrap()
            )
        }
    }
}

fn big_inputs() {
    const MIB: usize = 1 << 20;
    // A CPU list of full ranges, over and over: each range must not cost 65536 inserts.
    timed("cpulist ranges", &"0-65535,".repeat(MIB / 8), |t| {
        let _ = numa::parse_cpulist(t);
    });
    timed("cpulist singles", &"1,".repeat(MIB), |t| {
        let _ = numa::parse_cpulist(t);
    });
    timed("cpumask", &"ffffffff,".repeat(2048), |t| {
        let _ = numa::parse_cpumask(t);
    });
    timed("distance", &"10 ".repeat(MIB), |t| {
        let _ = numa::parse_distance(t);
    });
    // One 4 MiB line, and 4 MiB of XID lines.
    timed("kmsg one line", &"NVRM: Xid (".repeat(4 * MIB / 11), |t| {
        let _ = xid::parse_kernel_log(t);
    });
    timed(
        "kmsg many xids",
        &"[ 1.0] NVRM: Xid (PCI:0000:18:00): 79, pid=1, name=x, GPU has fallen off the bus.\n"
            .repeat(4 * MIB / 80),
        |t| {
            let _ = xid::parse_kernel_log(t);
        },
    );
    timed(
        "kmsg continuation",
        &format!(
            "NVRM: Xid (PCI:0000:18:00): 119, pid=1, x\n{}",
            "NVRM:     entry function 0x1\n".repeat(4 * MIB / 29)
        ),
        |t| {
            let _ = xid::parse_kernel_log(t);
        },
    );
    let modules = healthy("proc/modules");
    timed("modules", &modules.repeat(4 * MIB / modules.len()), |t| {
        let _ = modules::parse_proc_modules(t);
    });
    // Nesting thousands deep: a recursive parser must refuse, not overflow its stack (a stack
    // overflow aborts the process; it cannot be caught like a panic).
    for depth in [1_000, 100_000] {
        let json = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        timed("json nesting", &json, |t| {
            let _ = nvml::parse_nvml_json(t);
            let _ = gpudoctor::answers::pod_resources::parse_pod_resources_json(t);
            let _ = k8s::parse_checkpoint(t);
            let _ = kubelet::parse_kubelet_config(&format!("{{\"a\":{t}}}"));
            let _ = cdi::parse_cdi_spec(t, "x.json");
        });
        let toml = format!("a = {}{}", "[".repeat(depth), "]".repeat(depth));
        timed("toml nesting", &toml, |t| {
            let _ = toolkit::parse_toolkit_config(t);
            let _ = toolkit::parse_containerd(t, "x.toml");
            let _ = toolkit::parse_crio(t, "x.toml");
            let _ = profile::parse_file(Path::new("x.toml"), t);
        });
        let inline = format!("a = {}{}", "{b=".repeat(depth), "}".repeat(depth));
        timed("toml inline tables", &inline, |t| {
            let _ = toolkit::parse_containerd(t, "x.toml");
            let _ = profile::parse_file(Path::new("x.toml"), t);
        });
        let dotted = format!("{} = 1", vec!["a"; depth].join("."));
        timed("toml dotted keys", &dotted, |t| {
            let _ = toolkit::parse_containerd(t, "x.toml");
        });
        let yaml = format!(
            "kind: x\ndevices: {}{}",
            "[".repeat(depth),
            "]".repeat(depth)
        );
        timed("yaml nesting", &yaml, |t| {
            let _ = cdi::parse_cdi_spec(t, "x.yaml");
        });
        let block: String = (0..depth.min(2_000))
            .map(|i| format!("{}- \n", " ".repeat(i)))
            .collect();
        timed("yaml block nesting", &block, |t| {
            let _ = cdi::parse_cdi_spec(t, "x.yaml");
        });
    }
    // Billion laughs: nine levels of aliases, each ten times the one before.
    let mut bomb = String::from(
        "kind: x\na0: &a0 [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
    );
    for level in 1..10 {
        let refs = vec![format!("*a{}", level - 1); 10].join(",");
        bomb.push_str(&format!("a{level}: &a{level} [{refs}]\n"));
    }
    bomb.push_str("devices: *a9\n");
    timed("yaml alias bomb", &bomb, |t| {
        let _ = cdi::parse_cdi_spec(t, "x.yaml");
    });
    // Many aliases of one large anchor.
    let wide = format!(
        "kind: x\nbase: &b [{}]\nmore: [{}]\n",
        vec!["x"; 10_000].join(","),
        vec!["*b"; 50_000].join(",")
    );
    timed("yaml wide aliases", &wide, |t| {
        let _ = cdi::parse_cdi_spec(t, "x.yaml");
    });
    // NCCL: one 8 MiB line (cut at 16 KiB), and 8 MiB of INFO transport lines.
    timed(
        "nccl one line",
        &"Channel 00/0 : ".repeat(8 * MIB / 15),
        |t| {
            let _ = nccl::parse_log(t);
        },
    );
    timed(
        "nccl info lines",
        &"hgx-h100-01:41234:41262 [0] NCCL INFO Channel 00/0 : 1[1] -> 0[0] [send] via NET/IB/0/GDRDMA\n"
            .repeat(8 * MIB / 93),
        |t| {
            let mut parser = nccl::NcclLogParser::new();
            parser.feed_bytes(t.as_bytes());
            let _ = parser.finish();
        },
    );
    let cmdline = "iommu=pt ".repeat(MIB / 9);
    timed("cmdline", &cmdline, |t| {
        let _ = iommu::parse_cmdline(t);
    });
    let kubelet_yaml = "kind: KubeletConfiguration\n".repeat(MIB / 27);
    timed("kubelet yaml", &kubelet_yaml, |t| {
        let _ = kubelet::parse_kubelet_config(t);
    });
    let info = "Model: \t NVIDIA H100 80GB HBM3\n".repeat(MIB / 30);
    timed("information", &info, |t| {
        let _ = nvidia::parse_information(t);
        let _ = nvidia::parse_proc_driver_version(t);
    });
    let profile_text = format!("name = \"{}\"\n", "x".repeat(4 * MIB));
    timed("profile long string", &profile_text, |t| {
        let _ = profile::parse_file(Path::new("x.toml"), t);
    });
    let many_keys: String = (0..100_000).map(|i| format!("k{i} = 1\n")).collect();
    timed("profile many unknown keys", &many_keys, |t| {
        let _ = profile::parse_file(Path::new("x.toml"), t);
    });
    let line_col = "x\n".repeat(2 * MIB);
    timed("line_column", &line_col, |t| {
        let _ = toolkit::line_column(t, t.len());
    });
}

//! Readings that cross the live probe unchanged: NVLink 5 counters, firmware and clocks, every
//! reading, MIG devices, newer struct versions, an old driver's fallbacks, compute processes.

use super::*;

/// NVLink 5 is known by the architecture: the stand-in answers a Blackwell GPU's DL counters
/// with zeros (what a quiet NVLink 4 link answers), so a probe that tells NVLink 5 by the DL
/// answers reads eight quiet links and never asks the field values that hold link 9's errors.
#[test]
fn nvlink5_is_known_by_the_architecture_not_by_the_dl_answers() {
    let path =
        common::complete(&common::repo().join("fixtures/b200-nvlink-errors")).join(NVML_JSON);
    let facts: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(facts["devices"][0]["architecture"], json!({"value": 10}));
    let live = probe_injected("b200 NVLink 5 counters", &facts);
    let noisy = live
        .devices
        .iter()
        .find(|d| d.pci_bus_id.as_deref() == Some("0000:9a:00.0"))
        .unwrap();
    let link = &noisy.nvlinks.value().unwrap()[9];
    assert_eq!(link.symbol_errors.value(), Some(&187));
    assert_eq!(
        link.replay_errors,
        gpudoctor::answers::nvml::Reading::NotSupported
    );
}

/// The firmware, part number, module and clock readings (issue 46): a corrupted InfoROM is the
/// answer `false` (NVML_ERROR_CORRUPTED_INFOROM), not a failed reading; an odd VBIOS and lowered
/// application clocks come back as recorded; a GPU that answers none of them stays "not
/// supported"; an error kind stays that kind.
#[test]
fn firmware_and_clock_readings_round_trip() {
    let mut facts = healthy_json();
    facts["devices"][2]["inforom_valid"] = json!({"value": false});
    facts["devices"][3]["vbios_version"] = json!({"value": "96.00.89.00.01"});
    facts["devices"][4]["applications_clocks"] =
        json!({"value": {"graphics_mhz": 1410, "memory_mhz": 1593}});
    for field in [
        "vbios_version",
        "inforom_image_version",
        "inforom_valid",
        "applications_clocks",
        "default_applications_clocks",
        "max_clocks",
        "board_part_number",
        "module_id",
    ] {
        facts["devices"][5][field] = json!("not_supported");
        facts["devices"][6][field] = json!({"error": {"kind": "no_permission", "message": "x"}});
    }
    facts["devices"][4]["max_clocks"] =
        json!({"value": {"graphics_mhz": 1980, "memory_mhz": 2619}});
    let live = probe_injected("firmware and clocks", &facts);
    assert_eq!(live.devices[2].inforom_valid.value(), Some(&false));
    let max = live.devices[4].max_clocks.value().copied();
    assert_eq!(
        max.map(|c| (c.graphics_mhz, c.memory_mhz)),
        Some((1980, 2619))
    );
    assert_eq!(live.devices[7].module_id.value(), Some(&8));
    assert_eq!(
        live.devices[0]
            .board_part_number
            .value()
            .map(String::as_str),
        Some("692-2G520-0200-000")
    );
}

/// Every reading with a value, so each fake entry point and each live mapping is crossed even
/// while the fixtures carry fewer fields.
#[test]
fn every_reading_round_trips() {
    let mut facts = healthy_json();
    let link = |n: u32, active: bool, remote: &str| {
        if !active {
            // Only the state is asked of a down link.
            return json!({"link": n, "active": false});
        }
        json!({
            "link": n, "active": active, "version": {"value": 4},
            "remote_pci_bus_id": remote, "remote_type": {"value": "nvswitch"},
            "replay_errors": {"value": n}, "recovery_errors": {"value": 0},
            "crc_flit_errors": {"value": 7}, "crc_data_errors": "not_supported"
        })
    };
    let rich = json!({
        "ecc_mode": {"value": {"current": true, "pending": false}},
        "ecc_errors": {"value": {"volatile_corrected": 1, "volatile_uncorrected": 2,
                                  "aggregate_corrected": 30, "aggregate_uncorrected": 4}},
        "retired_pages": {"value": {"single_bit": 2, "double_bit": 1, "pending": true}},
        "remapped_rows": {"value": {"correctable": 3, "uncorrectable": 1, "pending": true, "failure": false}},
        "temperature_c": {"value": 41},
        "temperature_slowdown_c": {"value": 87},
        "temperature_shutdown_c": {"value": 92},
        "power_usage_mw": {"value": 71234},
        "power_limit_mw": {"value": 700000},
        "clock_event_reasons": {"value": 4294967297u64},
        "utilization_gpu_pct": {"value": 0},
        "pcie_current_gen": {"value": 5},
        "pcie_max_gen": {"value": 5},
        "pcie_current_width": {"value": 16},
        "pcie_max_width": {"value": 16},
        "pcie_replay_counter": {"value": 12},
        "mig_mode": {"value": {"current": false, "pending": true}},
        "nvlinks": {"value": [link(0, true, "0000:05:00.0"), link(1, false, ""), link(2, true, "0000:9A:00.0")]},
        "fabric": {"value": {"state": "completed", "status": "success", "clique_id": 32766,
                              "cluster_uuid": "0123456789abcdef0123456789abcdef", "health_mask": 5}}
    });
    for (key, value) in rich.as_object().unwrap() {
        facts["devices"][0][key] = value.clone();
    }
    // An older driver's fabric answer (no health mask: the v1 call) and one not yet trained.
    facts["devices"][1]["fabric"] = json!({"value": {"state": "completed", "status": "success", "clique_id": 1, "cluster_uuid": null, "health_mask": null}});
    facts["devices"][2]["fabric"] = json!({"value": {"state": "in_progress", "status": null, "clique_id": 0, "cluster_uuid": null, "health_mask": 0}});
    // Errors other than not-supported, per reading.
    for field in [
        "serial",
        "temperature_c",
        "ecc_errors",
        "retired_pages",
        "nvlinks",
        "fabric",
    ] {
        facts["devices"][3][field] = json!({"error": "Unknown Error"});
    }
    facts["devices"][4]["persistence_mode"] = json!({"value": false});
    facts["devices"][4]["minor_number"] = json!("not_supported");

    // The remote bus id is normalised on the way back, as for the gpu's own.
    let mut expected = facts.clone();
    expected["devices"][0]["nvlinks"]["value"][2]["remote_pci_bus_id"] = json!("0000:9a:00.0");
    let held = nvml_lock();
    let dir = common::tempdir().unwrap();
    let json_path = dir.path().join("nvml.json");
    std::fs::write(&json_path, facts.to_string()).unwrap();
    use_json(&held, &json_path);
    let live = live_source(dir.path()).nvml();
    let expected = parse_nvml_json(&expected.to_string()).unwrap();
    assert_same(
        "every reading",
        &without_messages(&expected),
        &without_messages(&live),
    );
}

/// MIG devices through the live walk: a GPU in MIG mode with every MIG field, index gaps
/// (NVML's NOT_FOUND) and a MIG handle that fails; MIG on with no instance (an empty list, a
/// fact); MIG on but not enumerated (an older capture: `not_supported`) or unreadable; and a
/// GPU with MIG off, whose devices are never walked.
#[test]
fn mig_devices_round_trip() {
    let mut facts = healthy_json();
    let on = json!({"value": {"current": true, "pending": true}});
    let mig = |index: u32, gi: u32, profile: &str, mib: u64| {
        json!({
            "index": index,
            "uuid": format!("MIG-5b2c1f0e-4d3a-5e6f-8a9b-{index:012x}"),
            "name": format!("NVIDIA H100 80GB HBM3 MIG {profile}"),
            "gpu_instance_id": {"value": gi}, "compute_instance_id": {"value": 0},
            "memory_total_mib": {"value": mib}, "error": null
        })
    };
    facts["devices"][0]["mig_mode"] = on.clone();
    facts["devices"][0]["mig_devices"] = json!({"value": [
        mig(0, 2, "3g.40gb", 40192),
        mig(1, 7, "1g.10gb", 9984),
        // Index 2 has no MIG device (a gap), index 3 one whose handle failed.
        {"index": 3, "uuid": null, "name": null, "gpu_instance_id": "not_supported",
         "compute_instance_id": "not_supported", "memory_total_mib": "not_supported",
         "error": {"kind": "unknown", "message": "Unknown Error"}},
        {"index": 4, "uuid": "MIG-5b2c1f0e-4d3a-5e6f-8a9b-000000000004", "name": null,
         "gpu_instance_id": {"value": 9}, "compute_instance_id": {"error": "Unknown Error"},
         "memory_total_mib": "not_supported", "error": null}
    ]});
    facts["devices"][1]["mig_mode"] = on.clone();
    facts["devices"][1]["mig_devices"] = json!({"value": []});
    facts["devices"][2]["mig_mode"] = on.clone();
    facts["devices"][2]["mig_devices"] = json!("not_supported");
    facts["devices"][3]["mig_mode"] = on;
    facts["devices"][3]["mig_devices"] = json!({"error": "Unknown Error"});
    let live = probe_injected("MIG devices", &facts);
    let migs = live.devices[0].mig_list().expect("GPU 0 enumerated");
    assert_eq!(
        migs.iter().map(|m| m.index).collect::<Vec<_>>(),
        [0, 1, 3, 4]
    );
    assert_eq!(migs[1].profile(), Some("1g.10gb"));
    assert_eq!(live.devices[1].mig_list(), Some(&[][..]));
    assert!(live.devices[2].mig_list().is_none());

    // MIG off: a recorded list is not walked (the max count is 0 on a real driver), so what
    // comes back is "not supported", whatever the file says.
    let mut off = facts.clone();
    off["devices"][0]["mig_mode"] = json!({"value": {"current": false, "pending": false}});
    let held = nvml_lock();
    let dir = common::tempdir().unwrap();
    let json_path = dir.path().join("nvml.json");
    std::fs::write(&json_path, off.to_string()).unwrap();
    use_json(&held, &json_path);
    let live = live_source(dir.path()).nvml();
    assert_eq!(
        live.devices[0].mig_devices,
        gpudoctor::answers::nvml::Reading::NotSupported
    );
}

/// The fabric through every struct version the probe knows: v3 (health summary and mask), v2
/// (mask only: the driver refuses v3 with ARGUMENT_VERSION_MISMATCH), and v1 when the V call
/// answers NOT_SUPPORTED; an unknown status code kept by number. NVLink 5 counters as field
/// values where the DL counters are not supported; row remapping under MIG from the field
/// values; utilisation not supported under MIG.
#[test]
fn newer_readings_round_trip() {
    let mut facts = healthy_json();
    let v = |x: Value| json!({"value": x});
    facts["devices"][0]["fabric"] = v(json!({"state": "completed", "status": "success",
        "clique_id": 32766, "cluster_uuid": "3143b15bc2cd192b28cc9b5473fb5b93",
        "health_mask": 0xa9, "health_summary": "limited_capacity"}));
    facts["devices"][1]["fabric"] = v(json!({"state": "completed", "status": "42",
        "clique_id": 0, "cluster_uuid": null, "health_mask": 0xaa, "health_summary": null}));
    facts["devices"][2]["fabric"] = v(json!({"state": "completed", "status": "success",
        "clique_id": 0, "cluster_uuid": null, "health_mask": null, "health_summary": null}));
    facts["devices"][3]["fabric"] = v(json!({"state": "completed", "status": "success",
        "clique_id": 0, "cluster_uuid": null, "health_mask": 0, "health_summary": 7}));
    // GPU 4: NVLink 5 (Blackwell): DL counters not supported, field values instead.
    for link in facts["devices"][4]["nvlinks"]["value"]
        .as_array_mut()
        .unwrap()
    {
        for dl in [
            "replay_errors",
            "recovery_errors",
            "crc_flit_errors",
            "crc_data_errors",
        ] {
            link[dl] = json!("not_supported");
        }
        let n = link["link"].as_u64().unwrap();
        link["rcv_errors"] = v(json!(n));
        link["malformed_packet_errors"] = v(json!(0));
        link["buffer_overrun_errors"] = v(json!(0));
        link["local_link_integrity_errors"] = v(json!(1));
        link["link_recovery_failed"] = v(json!(0));
        link["symbol_errors"] = v(json!(n * 3));
        link["effective_errors"] = json!("not_supported");
    }
    // GPU 5: MIG on; the direct row-remap call refuses, the field values answer.
    facts["devices"][5]["mig_mode"] = v(json!({"current": true, "pending": true}));
    facts["devices"][5]["mig_devices"] = v(json!([]));
    facts["devices"][5]["remapped_rows"] =
        v(json!({"correctable": 2, "uncorrectable": 1, "pending": true, "failure": false}));
    facts["devices"][5]["utilization_gpu_pct"] = json!("not_supported");
    let live = probe_injected("newer readings", &facts);
    let summary = live.devices[0].fabric.value().unwrap().health_summary;
    assert_eq!(
        summary,
        Some(gpudoctor::answers::nvml::HealthSummary::LimitedCapacity)
    );
    assert_eq!(
        live.devices[1].fabric.value().unwrap().status.as_deref(),
        Some("42")
    );
    assert_eq!(live.devices[2].fabric.value().unwrap().health_mask, None);
    let link = &live.devices[4].nvlinks.value().unwrap()[3];
    assert_eq!(link.symbol_errors.value(), Some(&9));
    assert_eq!(
        link.replay_errors,
        gpudoctor::answers::nvml::Reading::NotSupported
    );
    assert!(live.devices[5].remapped_rows.value().unwrap().pending);
}

/// A driver without the newer symbols (the stand-in built with `--features old-driver`): the
/// fabric comes from the v1 call (no health mask or summary) and the clock-event reasons from
/// the pre-R535 `nvmlDeviceGetCurrentClocksThrottleReasons`.
#[test]
fn an_old_driver_takes_the_fallbacks() {
    let mut facts = healthy_json();
    facts["devices"][0]["fabric"] = json!({"value": {"state": "completed", "status": "success",
        "clique_id": 5, "cluster_uuid": null, "health_mask": 0xaa, "health_summary": "healthy"}});
    facts["devices"][0]["clock_event_reasons"] = json!({"value": 0x88});
    let held = nvml_lock();
    let dir = common::tempdir().unwrap();
    let json_path = dir.path().join("nvml.json");
    std::fs::write(&json_path, facts.to_string()).unwrap();
    use_json(&held, &json_path);
    let host = HostSource::new(
        dir.path(),
        SourceOptions {
            nvml_lib: Some(common::fake_nvml_old_driver_lib().to_path_buf()),
            probe_timeout: Duration::from_secs(30),
            ..SourceOptions::default()
        },
    );
    let live = host.nvml();
    let mut expected = facts.clone();
    for d in expected["devices"].as_array_mut().unwrap() {
        if let Some(f) = d["fabric"].get_mut("value") {
            f["health_mask"] = Value::Null;
            f["health_summary"] = Value::Null;
        }
    }
    let expected = parse_nvml_json(&expected.to_string()).unwrap();
    assert_same(
        "old driver",
        &without_messages(&expected),
        &without_messages(&live),
    );
    assert_eq!(live.devices[0].clock_event_reasons.value(), Some(&0x88));
}

/// `nvmlDeviceGetComputeRunningProcesses_v3` through nvml-wrapper as the real library answers it
/// (nvml.h): a first call with a count of 0 and no array answers INSUFFICIENT_SIZE with the
/// count, the second fills `nvmlProcessInfo_v2_t` (pid, usedGpuMemory, gpuInstanceId,
/// computeInstanceId); a GPU with none answers SUCCESS with 0 to the first call; used memory
/// NVML_VALUE_NOT_AVAILABLE (ULLONG_MAX: in a container, under MIG) comes back as no figure,
/// never 16 EiB.
#[test]
fn compute_processes_cross_the_v3_call_with_unavailable_memory() {
    let mut facts = healthy_json();
    facts["devices"][2]["compute_processes"] = json!({"value": [
        {"pid": 60321, "used_memory_mib": 10240},
        {"pid": 60400, "used_memory_mib": null}
    ]});
    facts["devices"][3]["compute_processes"] = json!({"value": []});
    let held = nvml_lock();
    let dir = common::tempdir().unwrap();
    let json_path = dir.path().join("nvml.json");
    std::fs::write(&json_path, facts.to_string()).unwrap();
    use_json(&held, &json_path);
    let live = live_source(dir.path()).nvml();
    let list: Vec<(u32, Option<u64>)> = live.devices[2]
        .compute_processes
        .value()
        .expect("a process list")
        .iter()
        .map(|p| (p.pid, p.used_memory_mib))
        .collect();
    assert_eq!(list, [(60321, Some(10240)), (60400, None)]);
    assert_eq!(
        live.devices[3].compute_processes.value().map(Vec::len),
        Some(0)
    );
    let held: Vec<&str> = live
        .held_gpus()
        .iter()
        .filter_map(|(d, _)| d.pci_bus_id.as_deref())
        .collect();
    assert_eq!(held, ["0000:3a:00.0"]);
}

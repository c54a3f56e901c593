//! Configs as people paste them: kubelet `/configz` and OpenShift `KubeletConfig`, a containerd
//! config without the NVIDIA runtime, and a CDI spec judged on what it alone shows.

use super::*;

#[test]
fn configs_as_people_have_them() {
    // The kubelet's /configz answer and OpenShift's KubeletConfig: their policies are read.
    for (file, cpu) in [
        (
            "kubelet_configz_jq_eks-1.30_cpumanager-static_topology-single-numa-node.json",
            "static",
        ),
        (
            "openshift_kubeletconfig_oc-get-yaml_cpumanager-static_andreaskaris-blog.yaml",
            "static",
        ),
        (
            "openshift_node_kubelet.conf_json_cpumanager-static_andreaskaris-blog.json",
            "static",
        ),
    ] {
        let path = format!("{DATA}/{file}");
        let (report, _) = judge_json(&[&path]);
        assert!(
            report["source"]["root"]
                .as_str()
                .unwrap()
                .ends_with("(kubelet-config)")
        );
        let managers = status_of(&report, "topology.kubelet_managers")[0];
        let summary = managers["summary"].as_str().unwrap();
        assert!(
            summary.contains(&format!("CPU manager {cpu}")),
            "{file}: {summary}"
        );
        // Evidence names the pasted file, not where judge placed it.
        for e in managers["evidence"].as_array().unwrap() {
            assert!(e["source"].as_str().unwrap().starts_with(&path), "{e}");
        }
    }
    // A containerd config without the NVIDIA runtime or CDI: the toolkit layer fails.
    let path = "fixtures/h100-toolkit-fault-nvlinks-down/etc/containerd/config.toml";
    let (report, exit) = judge_json(&[path]);
    assert_eq!(exit, 1);
    assert!(
        report["source"]["root"]
            .as_str()
            .unwrap()
            .ends_with("(runtime-config)")
    );
    assert_eq!(
        status_of(&report, "toolkit.container_runtime")[0]["status"],
        "fail"
    );
    // A CDI spec is told apart.
    let (report, _) = judge_json(&["fixtures/hgx-h100-healthy/var/run/cdi/nvidia.yaml"]);
    assert!(
        report["source"]["root"]
            .as_str()
            .unwrap()
            .ends_with("(cdi-spec)")
    );
}

#[test]
fn a_cdi_spec_is_judged_on_what_it_alone_shows() {
    // The healthy H100 fixture's spec (nvidia-ctk's shape, cdiVersion 0.5.0, devices `0`..`7`,
    // their UUIDs and `all`): valid; its device nodes are the node's to check.
    let path = "fixtures/hgx-h100-healthy/var/run/cdi/nvidia.yaml";
    let (report, exit) = judge_json(&[path]);
    assert_eq!(exit, 0, "{report}");
    let c = status_of(&report, "toolkit.cdi_specs")[0];
    assert_eq!(c["status"], "pass", "{c}");
    let summary = c["summary"].as_str().unwrap();
    assert!(summary.contains("cdiVersion 0.5.0"), "{summary}");
    assert!(summary.contains("needs the node"), "{summary}");
    // What the CDI library refuses (container-device-interface specs-go/version.go,
    // pkg/parser/parser.go): each a failure naming why.
    let text = std::fs::read_to_string(common::repo().join(path)).unwrap();
    for (edit, why) in [
        (
            text.replace("cdiVersion: 0.5.0", "cdiVersion: 0.3.0"),
            "cdiVersion 0.3.0 is below 0.5.0, which a device name starting with a digit needs",
        ),
        (
            text.replace("cdiVersion: 0.5.0", "cdiVersion: 9.9.9"),
            "cdiVersion \"9.9.9\" is not one the CDI library knows",
        ),
        (
            text.replace("name: \"1\"", "name: \"0\"")
                .replace("name: '1'", "name: '0'"),
            "device \"0\" is defined twice",
        ),
        (
            text.replacen("kind: nvidia.com/gpu", "kind: nvidia", 1),
            "kind \"nvidia\" is not `vendor/class`",
        ),
    ] {
        assert_ne!(edit, text, "{why}");
        let (report, exit) = judge_text("spec.yaml", &edit);
        assert_eq!(exit, 1, "{why}: {report}");
        let c = status_of(&report, "toolkit.cdi_specs")[0];
        assert!(c["summary"].as_str().unwrap().contains(why), "{why}: {c}");
        assert!(
            c["evidence"][0]["source"]
                .as_str()
                .unwrap()
                .ends_with("spec.yaml"),
            "{c}"
        );
    }
    // A spec that does not parse.
    let (report, exit) = judge_text(
        "broken.yaml",
        "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices: [\n",
    );
    assert_eq!(exit, 1, "{report}");
    let c = status_of(&report, "toolkit.cdi_specs")[0];
    assert!(
        c["summary"]
            .as_str()
            .unwrap()
            .starts_with("CDI spec does not parse"),
        "{c}"
    );
}

use std::borrow::Cow;

use super::series::{Targets, nodes as nodes_of, status_of};
use super::*;
use crate::fleet::{NodeReport, Skipped};

/// The nodes of these samples, as `load` makes them.
fn nodes(samples: &[Sample<'_>], server: &str) -> (Vec<NodeReport>, Vec<Skipped>) {
    let mut targets = Targets::default();
    for s in samples {
        targets.add(s);
    }
    nodes_of(&targets, server)
}

/// The instant-query answer of Prometheus' HTTP API documentation, byte for byte
/// (prometheus.io/docs/prometheus/latest/querying/api/, "Instant queries", `up` example).
const DOC_ANSWER: &str = r#"{
   "status" : "success",
   "data" : {
      "resultType" : "vector",
      "result" : [
         {
            "metric" : {
               "__name__" : "up",
               "job" : "prometheus",
               "instance" : "localhost:9090"
            },
            "value": [ 1435781451.781, "1" ]
         },
         {
            "metric" : {
               "__name__" : "up",
               "job" : "node",
               "instance" : "localhost:9100"
            },
            "value" : [ 1435781451.781, "0" ]
         }
      ]
   }
}"#;

#[test]
fn the_documented_answer_reads_and_errors_are_said() {
    let samples = parse_answer(DOC_ANSWER.as_bytes()).unwrap();
    assert_eq!(samples.len(), 2);
    assert_eq!(samples[1].label("instance"), Some("localhost:9100"));
    assert_eq!(samples[1].label("__name__"), Some("up"));
    assert_eq!(samples[1].label("nope"), None);
    assert_eq!(&*samples[1].value.1, "0");
    // The documented error envelope.
    let err = parse_answer(
        br#"{"status":"error","errorType":"bad_data","error":"invalid parameter \"query\": 1:1: parse error"}"#,
    )
    .unwrap_err();
    assert!(err.contains("parse error"), "{err}");
    let err = parse_answer(br#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#)
        .unwrap_err();
    assert!(err.contains("matrix"), "{err}");
    assert!(parse_answer(b"<html>").is_err());
}

fn sample(labels: &[(&'static str, &'static str)], value: &'static str) -> Sample<'static> {
    Sample {
        metric: labels
            .iter()
            .map(|(k, v)| (Text(Cow::Borrowed(*k)), Text(Cow::Borrowed(*v))))
            .collect(),
        value: (1_767_225_600.0, Text(Cow::Borrowed(value))),
    }
}

/// One node as node-exporter's textfile collector exposes it, scraped by a job whose target has
/// a `node` label of its own (Kubernetes service discovery relabelled): ours is `exported_node`.
fn node(instance: &'static str, host: &'static str) -> Vec<Sample<'static>> {
    let t = |extra: &[(&'static str, &'static str)], name: &'static str| {
        let mut l: Vec<(&'static str, &'static str)> = vec![
            ("__name__", name),
            ("job", "node-exporter"),
            ("instance", instance),
            ("node", "k8s-name"),
        ];
        l.extend_from_slice(extra);
        l
    };
    vec![
        sample(
            &t(
                &[
                    ("version", "0.1.0"),
                    ("schema_version", "2"),
                    ("exported_node", host),
                    ("profile", "hgx-h100"),
                    ("source", "live"),
                ],
                "gpudoctor_info",
            ),
            "1",
        ),
        sample(&t(&[], "gpudoctor_exit_code"), "1"),
        sample(
            &t(&[], "gpudoctor_last_run_timestamp_seconds"),
            "1767225600",
        ),
        sample(&t(&[("layer", "driver")], "gpudoctor_layer_status"), "5"),
        sample(&t(&[("layer", "toolkit")], "gpudoctor_layer_status"), "2"),
        sample(
            &t(
                &[("layer", "driver"), ("check", "driver.gpu_on_pci")],
                "gpudoctor_check_status",
            ),
            "5",
        ),
        sample(
            &t(
                &[("layer", "driver"), ("check", "driver.nvml_init")],
                "gpudoctor_check_status",
            ),
            "5",
        ),
        sample(
            &t(
                &[
                    ("layer", "driver"),
                    ("check", "driver.nvml_init"),
                    ("cause", "driver.gpu_on_pci"),
                ],
                "gpudoctor_consequence_info",
            ),
            "1",
        ),
        sample(
            &t(
                &[
                    ("layer", "driver"),
                    ("check", "driver.gpu_on_pci"),
                    ("action", "hardware_inspection"),
                ],
                "gpudoctor_first_failure_info",
            ),
            "1",
        ),
        sample(
            &t(
                &[
                    ("gpu", "0000:3a:00.0"),
                    ("xid", "79"),
                    ("severity", "fatal"),
                    ("state", "live"),
                ],
                "gpudoctor_xid_events",
            ),
            "2",
        ),
        // A family a newer gpudoctor writes: left out, not a node of its own.
        sample(&t(&[("what", "x")], "gpudoctor_future_thing"), "1"),
    ]
}

#[test]
fn series_become_the_report_they_were_written_from() {
    let mut samples = node("10.0.0.1:9100", "gpu-01");
    samples.extend(node("10.0.0.2:9100", "gpu-02"));
    let (nodes, skipped) = nodes(&samples, "http://p:9090");
    assert!(skipped.is_empty(), "{skipped:?}");
    assert_eq!(nodes.len(), 2);
    let r = &nodes[0].report;
    assert_eq!(nodes[0].name, "gpu-01");
    assert!(
        nodes[0].file.contains(r#"instance="10.0.0.1:9100""#),
        "{}",
        nodes[0].file
    );
    assert_eq!(r.schema_version, 2);
    assert_eq!(r.profile.as_deref(), Some("hgx-h100"));
    assert_eq!(r.exit_code, 1);
    assert_eq!(r.generated_at.as_deref(), Some("2026-01-01T00:00:00Z"));
    assert_eq!(
        r.layers
            .iter()
            .map(|l| (l.id.as_str(), l.status.as_str()))
            .collect::<Vec<_>>(),
        vec![("driver", "fail"), ("toolkit", "not_run")]
    );
    let first = r.first_failure.as_ref().unwrap();
    assert_eq!(
        (first.code.as_str(), first.action.as_deref()),
        ("driver.gpu_on_pci", Some("hardware_inspection"))
    );
    let nvml = r.layers[0]
        .checks
        .iter()
        .find(|c| c.code == "driver.nvml_init")
        .unwrap();
    assert_eq!(nvml.explained_by.as_deref(), Some("driver.gpu_on_pci"));
    // A figure without its check's status series: the check passed (only checks that did not
    // pass are asked for one by one), and carries the figure.
    let xid = r.layers[0]
        .checks
        .iter()
        .find(|c| c.code == "driver.xid_events")
        .unwrap();
    assert_eq!(xid.status, "pass");
    assert_eq!(xid.figures.len(), 1);
    assert_eq!(xid.figures[0].labels["xid"], "79");
}

#[test]
fn schema_one_numbers_statuses_otherwise() {
    assert_eq!(status_of(2.0, 1), "fail");
    assert_eq!(status_of(2.0, 2), "not_run");
    assert_eq!(status_of(5.0, 2), "fail");
    assert!(status_of(9.0, 2).starts_with("unknown"));
    assert!(status_of(1.5, 2).starts_with("unknown"));
}

#[test]
fn a_target_without_info_is_skipped_not_a_node() {
    let samples = vec![sample(
        &[
            ("__name__", "gpudoctor_exit_code"),
            ("instance", "x:9100"),
            ("job", "j"),
        ],
        "0",
    )];
    let (nodes, skipped) = nodes(&samples, "http://p:9090");
    assert!(nodes.is_empty());
    assert_eq!(skipped.len(), 1);
    assert!(skipped[0].why.contains("without gpudoctor_info"));
}

#[test]
fn a_run_time_no_clock_can_hold_is_no_time_not_a_crash() {
    for bad in ["1e19", "-5", "NaN", "+Inf", "1.8446744073709552e19"] {
        let samples = vec![
            sample(
                &[
                    ("__name__", "gpudoctor_info"),
                    ("instance", "x:9100"),
                    ("node", "n"),
                ],
                "1",
            ),
            sample(
                &[
                    ("__name__", "gpudoctor_last_run_timestamp_seconds"),
                    ("instance", "x:9100"),
                ],
                bad,
            ),
        ];
        let (nodes, _) = nodes(&samples, "http://p:9090");
        assert_eq!(nodes.len(), 1, "{bad}");
        assert_eq!(nodes[0].report.generated_at, None, "{bad}");
    }
}

#[test]
fn labels_read_sorted_whatever_order_the_answer_gives() {
    let body = br#"{"status":"success","data":{"resultType":"vector","result":[
        {"metric":{"job":"j","__name__":"up","instance":"a:1","job":"k"},"value":[1,"1"]}]}}"#;
    let samples = parse_answer(body).unwrap();
    let names: Vec<&str> = samples[0].metric.iter().map(|(k, _)| &**k).collect();
    assert_eq!(names, ["__name__", "instance", "job"]);
    // A name given twice keeps its last value, as a map would.
    assert_eq!(samples[0].label("job"), Some("k"));
}

#[test]
fn passes_are_counted_per_check_under_our_name() {
    // `count by (layer, check, exported_layer, exported_check)`: a target with a `check` label
    // of its own leaves ours as `exported_check`.
    let body = br#"{"status":"success","data":{"resultType":"vector","result":[
        {"metric":{"check":"driver.nvml_init","layer":"driver"},"value":[1,"497"]},
        {"metric":{"check":"target-check","exported_check":"driver.nvml_init","layer":"driver"},"value":[1,"3"]},
        {"metric":{"check":"nccl.bus_bandwidth","layer":"nccl"},"value":[1,"NaN"]},
        {"metric":{"layer":"nccl"},"value":[1,"5"]}]}}"#;
    let counted = passes(&parse_answer(body).unwrap());
    assert_eq!(counted.get("driver.nvml_init"), Some(&500));
    assert_eq!(counted.len(), 1, "{counted:?}");
}

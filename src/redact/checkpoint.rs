//! The kubelet's device-plugin checkpoint (`var/lib/kubelet/device-plugins/
//! kubelet_internal_checkpoint`, reference/kubernetes.md §3) keeps each plugin's answer to
//! `Allocate` as `AllocResp`: a protobuf `ContainerAllocateResponse` in base64 (Go's `[]byte` in
//! JSON). Its `envs` hold `NVIDIA_VISIBLE_DEVICES=GPU-<uuid>,...`, its `cdi_devices`
//! `nvidia.com/gpu=GPU-<uuid>`: the GPU UUIDs redaction replaces everywhere else, invisible to a
//! text scan. Each answer is decoded, every string in it redacted like any other text (so a UUID
//! gets the placeholder it has in `nvml.json`), and encoded again; an answer that does not decode
//! as one is emptied (`""`, what the kubelet writes for a plugin that returned nothing) and the
//! manifest says so. The JSON around it is left byte for byte: only the base64 strings change.
//! The checkpoint's `Checksum` no longer matches; gpudoctor never validates it (§3), and a
//! capture is not a kubelet's state.
//!
//! Messages as `k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1/api.proto` defines them (fields 1–4
//! since 1.8, `cdi_devices` since 1.28). Fields this does not know are dropped, and said.

use std::collections::BTreeMap;

use base64::Engine as _;
use prost::Message;

use super::{Kind, Redactor};

#[derive(Clone, PartialEq, Message)]
struct ContainerAllocateResponse {
    #[prost(btree_map = "string, string", tag = "1")]
    envs: BTreeMap<String, String>,
    #[prost(message, repeated, tag = "2")]
    mounts: Vec<Mount>,
    #[prost(message, repeated, tag = "3")]
    devices: Vec<DeviceSpec>,
    #[prost(btree_map = "string, string", tag = "4")]
    annotations: BTreeMap<String, String>,
    #[prost(message, repeated, tag = "5")]
    cdi_devices: Vec<CdiDevice>,
}

#[derive(Clone, PartialEq, Message)]
struct Mount {
    #[prost(string, tag = "1")]
    container_path: String,
    #[prost(string, tag = "2")]
    host_path: String,
    #[prost(bool, tag = "3")]
    read_only: bool,
}

#[derive(Clone, PartialEq, Message)]
struct DeviceSpec {
    #[prost(string, tag = "1")]
    container_path: String,
    #[prost(string, tag = "2")]
    host_path: String,
    #[prost(string, tag = "3")]
    permissions: String,
}

#[derive(Clone, PartialEq, Message)]
struct CdiDevice {
    #[prost(string, tag = "1")]
    name: String,
}

const FIELD: &str = "\"AllocResp\"";
const POD_UID: &str = "\"PodUID\"";

/// What happened to one `AllocResp`.
enum Outcome {
    Redacted { dropped_unknown: bool },
    Emptied,
}

/// The string value after `"key"` at `at` (`"key" : "value"`): the byte range of the value.
fn string_value(text: &str, key_at: usize, key: &str) -> Option<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut i = key_at + key.len();
    while bytes.get(i).is_some_and(u8::is_ascii_whitespace) {
        i += 1;
    }
    if bytes.get(i) != Some(&b':') {
        return None;
    }
    i += 1;
    while bytes.get(i).is_some_and(u8::is_ascii_whitespace) {
        i += 1;
    }
    if bytes.get(i) != Some(&b'"') {
        return None;
    }
    let start = i + 1;
    let len = text[start..].find('"')?;
    Some((start, start + len))
}

impl Redactor {
    /// The checkpoint text with every `AllocResp` redacted (see the module doc), and its Pod
    /// UIDs learnt as such.
    pub(super) fn redact_checkpoint(&mut self, rel: &str, text: &str) -> String {
        for (at, _) in text.match_indices(POD_UID) {
            if let Some((start, end)) = string_value(text, at, POD_UID) {
                self.know_uuid(&text[start..end], Kind::PodUid);
            }
        }
        let mut out = String::with_capacity(text.len());
        let mut copied = 0;
        let (mut redacted, mut emptied, mut unknown) = (0, 0, 0);
        for (at, _) in text.match_indices(FIELD) {
            let Some((start, end)) = string_value(text, at, FIELD) else {
                continue;
            };
            if start < copied {
                continue;
            }
            out.push_str(&text[copied..start]);
            let (value, outcome) = self.alloc_resp(&text[start..end]);
            match outcome {
                Some(Outcome::Redacted { dropped_unknown }) => {
                    redacted += 1;
                    unknown += usize::from(dropped_unknown);
                }
                Some(Outcome::Emptied) => emptied += 1,
                None => {}
            }
            out.push_str(&value);
            copied = end;
        }
        out.push_str(&text[copied..]);
        if redacted > 0 {
            self.note(format!(
                "{rel}: {redacted} AllocResp (ContainerAllocateResponse) decoded, redacted and encoded again{}",
                if unknown > 0 {
                    format!("; {unknown} of them had fields this gpudoctor does not know, dropped")
                } else {
                    String::new()
                }
            ));
        }
        if emptied > 0 {
            self.note(format!(
                "{rel}: {emptied} AllocResp that did not decode as a ContainerAllocateResponse emptied"
            ));
        }
        out
    }

    /// One base64 `AllocResp`, redacted; `None` when there was nothing to do (empty).
    fn alloc_resp(&mut self, base64: &str) -> (String, Option<Outcome>) {
        if base64.is_empty() {
            return (String::new(), None);
        }
        let engine = base64::engine::general_purpose::STANDARD;
        let decoded = engine.decode(base64).ok().and_then(|bytes| {
            Some((
                ContainerAllocateResponse::decode(bytes.as_slice()).ok()?,
                bytes.len(),
            ))
        });
        let Some((mut answer, original_len)) = decoded else {
            return (String::new(), Some(Outcome::Emptied));
        };
        let dropped_unknown = answer.encoded_len() != original_len;
        let mut redact = |s: &mut String| *s = self.redact(s);
        for map in [&mut answer.envs, &mut answer.annotations] {
            *map = std::mem::take(map)
                .into_iter()
                .map(|(mut k, mut v)| {
                    redact(&mut k);
                    redact(&mut v);
                    (k, v)
                })
                .collect();
        }
        for m in &mut answer.mounts {
            redact(&mut m.container_path);
            redact(&mut m.host_path);
        }
        for d in &mut answer.devices {
            redact(&mut d.container_path);
            redact(&mut d.host_path);
            redact(&mut d.permissions);
        }
        for c in &mut answer.cdi_devices {
            redact(&mut c.name);
        }
        (
            engine.encode(answer.encode_to_vec()),
            Some(Outcome::Redacted { dropped_unknown }),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHECKPOINT: &str = "var/lib/kubelet/device-plugins/kubelet_internal_checkpoint";

    fn decode(base64: &str) -> ContainerAllocateResponse {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(base64)
            .unwrap();
        ContainerAllocateResponse::decode(bytes.as_slice()).unwrap()
    }

    fn alloc_resps(text: &str) -> Vec<String> {
        text.match_indices(FIELD)
            .filter_map(|(at, _)| string_value(text, at, FIELD))
            .map(|(s, e)| text[s..e].to_string())
            .collect()
    }

    /// kubernetes/kubernetes#75880 ("one gpu card allocated to two pods", 2019): a v1 checkpoint
    /// (`DeviceIDs` a list) as `python -m json.tool` printed it, the first two entries byte for
    /// byte (the issue shows more, cut here with the closing brackets added).
    const K8S_75880: &str = r#"{
    "Checksum": 3364951114,
    "Data": {
        "PodDeviceEntries": [
            {
                "AllocResp": "CkIKFk5WSURJQV9WSVNJQkxFX0RFVklDRVMSKEdQVS1hZDYzYzY4NC01NTkzLTExMWEtY2JiMS1jMTQ1MWViY2QwYWE=",
                "ContainerName": "notebook",
                "DeviceIDs": [
                    "GPU-ad63c684-5593-111a-cbb1-c1451ebcd0aa"
                ],
                "PodUID": "9a422c32-4fc2-11e9-bb64-505dac4c3a38",
                "ResourceName": "nvidia.com/gpu"
            },
            {
                "AllocResp": "CkIKFk5WSURJQV9WSVNJQkxFX0RFVklDRVMSKEdQVS03MmNiZjcyMy05ZjcwLTdkNDktYTZiYi02MjZmY2IzZjhjMzA=",
                "ContainerName": "notebook",
                "DeviceIDs": [
                    "GPU-72cbf723-9f70-7d49-a6bb-626fcb3f8c30"
                ],
                "PodUID": "368e63c4-2d97-11e9-8954-505dac4a7d28",
                "ResourceName": "nvidia.com/gpu"
            }
        ]
    }
}"#;

    /// A v2 checkpoint (NUMA-keyed `DeviceIDs`) from a public write-up of Topology Manager tests
    /// on a two-socket node (code-search index file 15180236118, "GPU+CPU numa亲和性"), one line
    /// byte for byte: its `AllocResp` carries `devices` (DeviceSpec) besides `envs`.
    const NUMA_V2: &str = r#"{"Data":{"PodDeviceEntries":[{"PodUID":"9a15d2b5-c152-46b9-96e0-d57032629e1f","ContainerName":"app","ResourceName":"nvidia.com/gpu","DeviceIDs":{"1":["GPU-9b341c59-f96b-ba85-c137-78c3652fea65","GPU-c1e9f249-b37b-81c2-a8d9-ba5ca0294841"]},"AllocResp":"CmsKFk5WSURJQV9WSVNJQkxFX0RFVklDRVMSUUdQVS1jMWU5ZjI0OS1iMzdiLTgxYzItYThkOS1iYTVjYTAyOTQ4NDEsR1BVLTliMzQxYzU5LWY5NmItYmE4NS1jMTM3LTc4YzM2NTJmZWE2NRokCg4vZGV2L252aWRpYWN0bBIOL2Rldi9udmlkaWFjdGwaAnJ3GiYKDy9kZXYvbnZpZGlhLXV2bRIPL2Rldi9udmlkaWEtdXZtGgJydxoyChUvZGV2L252aWRpYS11dm0tdG9vbHMSFS9kZXYvbnZpZGlhLXV2bS10b29scxoCcncaLgoTL2Rldi9udmlkaWEtbW9kZXNldBITL2Rldi9udmlkaWEtbW9kZXNldBoCcncaIAoML2Rldi9udmlkaWExEgwvZGV2L252aWRpYTEaAnJ3GiAKDC9kZXYvbnZpZGlhMhIML2Rldi9udmlkaWEyGgJydw=="}],"RegisteredDevices":{"nvidia.com/gpu":["GPU-77a702db-e37f-3a74-d46d-c5713f66058c","GPU-9b341c59-f96b-ba85-c137-78c3652fea65","GPU-c1e9f249-b37b-81c2-a8d9-ba5ca0294841"]}},"Checksum":2530956716}"#;

    #[test]
    fn real_checkpoints_keep_no_gpu_uuid_and_their_answers_still_decode() {
        for (name, text, uuids) in [
            (
                "kubernetes#75880",
                K8S_75880,
                &[
                    "ad63c684-5593-111a-cbb1-c1451ebcd0aa",
                    "72cbf723-9f70-7d49-a6bb-626fcb3f8c30",
                ][..],
            ),
            (
                "numa v2",
                NUMA_V2,
                &[
                    "c1e9f249-b37b-81c2-a8d9-ba5ca0294841",
                    "9b341c59-f96b-ba85-c137-78c3652fea65",
                ][..],
            ),
        ] {
            // The defect: the UUIDs are in the base64 and a text scan cannot see them.
            let before = alloc_resps(text);
            let decoded = decode(&before[0]);
            assert!(
                decoded.envs["NVIDIA_VISIBLE_DEVICES"].contains(uuids[0]),
                "{name}: {decoded:?}"
            );

            let mut r = Redactor::new();
            let out = r.redact_file(CHECKPOINT, text);
            for uuid in uuids {
                assert!(!out.contains(uuid), "{name}: {uuid} in {out}");
            }
            let after = alloc_resps(&out);
            assert_eq!(after.len(), before.len(), "{name}");
            for (old, new) in before.iter().zip(&after) {
                let (old, new) = (decode(old), decode(new));
                let mut expected = old.clone();
                for v in expected.envs.values_mut() {
                    *v = r.redact(v);
                }
                assert_eq!(new, expected, "{name}: only the identifiers changed");
                assert!(!format!("{new:?}").contains(uuids[0]), "{name}");
            }
            // The UUID in DeviceIDs and the one inside AllocResp got the same placeholder.
            let first = decode(&after[0]);
            let visible = &first.envs["NVIDIA_VISIBLE_DEVICES"];
            for id in visible.split(',') {
                assert!(
                    out.contains(&format!("\"{id}\"")),
                    "{name}: {id} not in DeviceIDs"
                );
            }
            // Pod UIDs are counted as such, and the JSON around the answers is unchanged.
            assert!(r.counts()["pod_uid"] >= 1, "{name}: {:?}", r.counts());
            assert!(
                r.notes()[0].contains("decoded, redacted and encoded again"),
                "{:?}",
                r.notes()
            );
            assert!(
                serde_json::from_str::<serde_json::Value>(&out).is_ok(),
                "{name}"
            );
            let parsed = crate::facts::k8s::parse_checkpoint(&out).unwrap();
            assert_eq!(
                parsed.entries.len(),
                crate::facts::k8s::parse_checkpoint(text)
                    .unwrap()
                    .entries
                    .len()
            );
        }
    }

    #[test]
    fn cdi_devices_mounts_and_annotations_are_redacted_too() {
        let answer = ContainerAllocateResponse {
            envs: BTreeMap::new(),
            mounts: vec![Mount {
                container_path: "/run/gpu-node-7".into(),
                host_path: "/var/lib/gpu-node-7/GPU-5f2e9a1c-0b1d-4c3e-8f70-1a2b3c4d5e6f".into(),
                read_only: true,
            }],
            devices: vec![],
            annotations: BTreeMap::from([(
                "cdi.k8s.io/nvidia-device-plugin".to_string(),
                "nvidia.com/gpu=GPU-5f2e9a1c-0b1d-4c3e-8f70-1a2b3c4d5e6f".to_string(),
            )]),
            cdi_devices: vec![CdiDevice {
                name: "nvidia.com/gpu=GPU-5f2e9a1c-0b1d-4c3e-8f70-1a2b3c4d5e6f".into(),
            }],
        };
        let b64 = base64::engine::general_purpose::STANDARD.encode(answer.encode_to_vec());
        let text = format!("{{\"Data\":{{\"PodDeviceEntries\":[{{\"AllocResp\": \"{b64}\"}}]}}}}");
        let mut r = Redactor::new();
        r.add_hostname("gpu-node-7", false);
        let out = r.redact_file(CHECKPOINT, &text);
        let new = decode(&alloc_resps(&out)[0]);
        let shown = format!("{new:?}");
        assert!(
            !shown.contains("5f2e9a1c") && !shown.contains("gpu-node-7"),
            "{shown}"
        );
        assert_eq!(
            new.cdi_devices[0].name,
            "nvidia.com/gpu=GPU-00000000-0000-4000-8000-000000000001"
        );
        assert!(new.mounts[0].read_only);
    }

    #[test]
    fn an_answer_that_does_not_decode_is_emptied_and_said() {
        let text = r#"{"Data":{"PodDeviceEntries":[{"AllocResp":"bm90IHByb3RvYnVm!!"},{"AllocResp":"////"},{"AllocResp":""}]}}"#;
        let mut r = Redactor::new();
        let out = r.redact_file(CHECKPOINT, text);
        assert_eq!(
            out,
            r#"{"Data":{"PodDeviceEntries":[{"AllocResp":""},{"AllocResp":""},{"AllocResp":""}]}}"#
        );
        assert_eq!(r.notes().len(), 1, "{:?}", r.notes());
        assert!(
            r.notes()[0].contains("2 AllocResp that did not decode"),
            "{:?}",
            r.notes()
        );
        // Other files are not read as checkpoints.
        let mut r = Redactor::new();
        assert_eq!(r.redact_file("etc/other.json", text), text);
    }
}

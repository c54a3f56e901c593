//! A CDI spec judged on its own (`gpudoctor judge spec.yaml`): what the spec alone can show —
//! it parses, names a `cdiVersion` the CDI library accepts and at least the version its
//! content needs, a valid `vendor/class` kind, and device names that are valid and unique.
//! Whether its device nodes exist and its devices are the node's GPUs needs the node
//! (`toolkit.cdi_specs` under `gpudoctor check`): said, never guessed.
//!
//! Rules from cncf-tags/container-device-interface: specs-go/version.go (`validSpecVersions`
//! 0.1.0–0.8.0, 1.0.0, 1.1.0; `requiresV050`: a device name starting with a digit needs
//! 0.5.0; `requiresV060`: a dot in the class needs 0.6.0), pkg/parser/parser.go
//! (`ValidateVendorName`/`ValidateClassName`: a letter first, then letters, digits, `_ - .`,
//! a letter or digit last; `ValidateDeviceName`: a letter or digit first and last, `_ - . :`
//! between), and pkg/cdi/spec.go (a device name defined twice is refused).

use crate::checks::{CheckDef, Context, Explain, Outcome};
use crate::report::{Action, Evidence, Layer};

/// The checks `judge` runs on a pasted CDI spec, under `check`'s code for CDI specs.
pub fn checks() -> Vec<CheckDef> {
    vec![CheckDef {
        code: "toolkit.cdi_specs",
        layer: Layer::Toolkit,
        title: "the CDI spec is valid on its own",
        explain: Explain {
            reads: "a pasted CDI spec (YAML or JSON)",
            expects: "it parses; cdiVersion is one the CDI library accepts and at least what its content needs; kind is `vendor/class`; device names are valid and unique",
            why: "a runtime refuses every CDI device while one spec in its directories is invalid (`unresolvable CDI devices`)",
            fix: "regenerate it: `nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml`",
        },
        run: spec_alone,
    }]
}

const VERSIONS: [&str; 10] = [
    "0.1.0", "0.2.0", "0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0", "1.0.0", "1.1.0",
];

fn is_letter(b: u8) -> bool {
    b.is_ascii_alphabetic()
}

/// `ValidateVendorName`/`ValidateClassName`.
fn valid_qualifier_part(name: &str) -> bool {
    let b = name.as_bytes();
    match (b.first(), b.last()) {
        (Some(&first), Some(&last)) => {
            is_letter(first)
                && last.is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.'))
        }
        _ => false,
    }
}

/// `ValidateDeviceName`.
fn valid_device_name(name: &str) -> bool {
    let b = name.as_bytes();
    match (b.first(), b.last()) {
        (Some(&first), Some(&last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.' | b':'))
        }
        _ => false,
    }
}

/// `1.0.0` as comparable numbers.
fn version(v: &str) -> Option<(u32, u32, u32)> {
    let mut parts = v.trim_start_matches('v').split('.').map(|p| p.parse().ok());
    Some((parts.next()??, parts.next()??, parts.next()??))
}

fn spec_alone(ctx: &Context<'_>) -> Outcome {
    let facts = ctx.cdi();
    if let Some(err) = facts.problems.first() {
        return Outcome::fail(format!("cdi spec does not parse: {}", err.message))
            .evidence(Evidence::new(&err.path, &err.message).expected("a valid cdi spec"))
            .hint("regenerate it: `nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml`; the runtime refuses every cdi device while a spec is broken")
            .action(Action::FixConfig);
    }
    let Some(spec) = facts.specs.first() else {
        return Outcome::skip("no cdi spec was read");
    };
    let mut problems = Vec::new();
    let v = spec.cdi_version.trim_start_matches('v');
    if spec.cdi_version.is_empty() {
        problems.push("no cdiVersion".to_string());
    } else if !VERSIONS.contains(&v) {
        problems.push(format!(
            "cdiVersion {:?} is not one the cdi library knows ({})",
            spec.cdi_version,
            VERSIONS.join(", ")
        ));
    }
    let (vendor, class) = spec.kind.split_once('/').unwrap_or(("", &spec.kind));
    if !valid_qualifier_part(vendor) || !valid_qualifier_part(class) {
        problems.push(format!("kind {:?} is not `vendor/class`", spec.kind));
    }
    let mut needs = ("0.3.0", "");
    if class.contains('.') {
        needs = ("0.6.0", "a dot in the class");
    }
    if needs.0 < "0.5.0"
        && spec
            .devices
            .iter()
            .any(|d| d.as_bytes().first().is_some_and(u8::is_ascii_digit))
    {
        needs = ("0.5.0", "a device name starting with a digit");
    }
    if let (Some(have), Some(need)) = (version(v), version(needs.0))
        && have < need
    {
        problems.push(format!(
            "cdiVersion {} is below {}, which {} needs",
            spec.cdi_version, needs.0, needs.1
        ));
    }
    let mut seen: Vec<&str> = Vec::new();
    for name in &spec.devices {
        if !valid_device_name(name) {
            problems.push(format!("device name {name:?} is not valid"));
        } else if seen.contains(&name.as_str()) {
            problems.push(format!("device {name:?} is defined twice"));
        }
        seen.push(name);
    }
    let node = "whether its device nodes exist and its devices are this node's gpus needs the node (`gpudoctor check` there)";
    if problems.is_empty() {
        return Outcome::pass(format!(
            "cdi spec {} (cdiVersion {}) offers {} device(s): {}; {node}",
            spec.kind,
            spec.cdi_version,
            spec.devices.len(),
            spec.devices.join(", ")
        ));
    }
    Outcome::fail(format!("cdi spec refused: {}; {node}", problems.join("; ")))
        .evidence(Evidence::new(&spec.path, problems.join("; ")).expected("a spec the cdi library accepts"))
        .hint("regenerate it: `nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml`; list what resolves with `nvidia-ctk cdi list`")
        .action(Action::FixConfig)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_as_the_cdi_parser_validates_them() {
        assert!(valid_qualifier_part("nvidia.com"));
        assert!(valid_qualifier_part("gpu"));
        assert!(!valid_qualifier_part("9gpu"));
        assert!(!valid_qualifier_part("gpu-"));
        assert!(valid_device_name("0"));
        assert!(valid_device_name(
            "GPU-4cf8db2d-06c0-7d70-1a51-e59b25b2c16c"
        ));
        assert!(valid_device_name("0:1"));
        assert!(!valid_device_name("all "));
        assert!(!valid_device_name(""));
        assert!(!valid_device_name("gpu/0"));
        assert_eq!(version("v0.5.0"), Some((0, 5, 0)));
        assert_eq!(version("x"), None);
    }
}

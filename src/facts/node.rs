//! Who this node is: host name and kernel release, read under the root so a replay names the
//! recorded node, never the machine replaying it.

use serde::Serialize;

use super::trimmed;
use crate::source::Source;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NodeIdentity {
    pub hostname: Option<String>,
    pub kernel: Option<String>,
}

/// First readable, non-empty, single-line value among `paths`.
fn first_value(source: &dyn Source, paths: &[&str]) -> Option<String> {
    paths.iter().find_map(|p| {
        let text = source.read_to_string(p).ok()?;
        let value = trimmed(text.lines().next().unwrap_or_default()).to_string();
        (!value.is_empty() && value.len() <= 255).then_some(value)
    })
}

pub fn gather(source: &dyn Source) -> NodeIdentity {
    NodeIdentity {
        hostname: first_value(source, &["proc/sys/kernel/hostname", "etc/hostname"]),
        kernel: first_value(source, &["proc/sys/kernel/osrelease"]).or_else(|| {
            // `/proc/version`: "Linux version 5.15.0-105-generic (buildd@...) ..."
            let text = source.read_to_string("proc/version").ok()?;
            text.split_whitespace().nth(2).map(str::to_string)
        }),
    }
}

//! Text helpers used on more than one floor: node text made safe for a terminal
//! ([`sanitize`]), word wrapping to the terminal's width ([`wrap`]), and column grids
//! ([`grid`]), acronyms and units as people write them ([`wording`]), numbers bounded in length
//! ([`number`]), and what a driver version looks like ([`is_driver_version`]). Plain functions of
//! strings; nothing here knows a report, a source or a check.

pub mod grid;
pub mod number;
pub mod sanitize;
pub mod wording;
pub mod wrap;

/// A driver version (`550.54.15`, `535.216.03`; Jetson `34.1.1`): two or three dot-separated
/// decimal fields. Read from `/proc/driver/nvidia/version` and from the names of the driver's
/// libraries (`libcuda.so.550.54.15`).
pub fn is_driver_version(token: &str) -> bool {
    let parts: Vec<&str> = token.split('.').collect();
    (2..=3).contains(&parts.len())
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
}

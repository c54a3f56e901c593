//! Tests of the RDMA layer's helpers: kernel versions, PCI slots and what a physical port state
//! means.

use super::gpudirect::kernel_major_minor;
use super::*;

#[test]
fn kernel_versions_parse() {
    assert_eq!(kernel_major_minor("5.15.0-105-generic"), Some((5, 15)));
    assert_eq!(kernel_major_minor("6.8.0"), Some((6, 8)));
    assert_eq!(
        kernel_major_minor("4.18.0-553.el8_10.x86_64"),
        Some((4, 18))
    );
    assert_eq!(kernel_major_minor("garbage"), None);
}

#[test]
fn slots_drop_the_function_number() {
    assert_eq!(pci_slot("0000:69:00.1"), "0000:69:00");
    assert_eq!(pci_slot("10000:00:04.0"), "10000:00:04");
    assert_eq!(pci_slot("garbage"), "garbage");
}

#[test]
fn physical_states_explain_themselves() {
    assert!(phys_meaning(Some(&(2, "Polling".into()))).contains("cable"));
    assert!(phys_meaning(Some(&(3, "Disabled".into()))).contains("administratively"));
    assert!(phys_meaning(None).contains("unknown"));
}

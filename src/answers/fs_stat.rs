//! What `statvfs(3)` says about the filesystem a directory sits on: the figures the disk checks
//! judge (`checks/disk.rs`) and a capture keeps in `.gpudoctor/statvfs.json` (a map from the
//! root-relative directory to its [`FsStat`], or to `{"error": ..}` when it could not be asked),
//! so a replay judges the numbers the node had. Pure types and the file's parser: no I/O.
//!
//! The fields are those the kubelet's eviction signals are computed from: cAdvisor's
//! `getVfsStats` (google/cadvisor `fs/fs.go`) takes `total = Frsize * Blocks`,
//! `available = Frsize * Bavail`, `inodes = Files`, `inodesFree = Ffree`, and the kubelet's
//! `nodefs.available`/`imagefs.available` and `*.inodesFree` signals are those over the totals
//! (kubernetes `pkg/kubelet/eviction/helpers.go`, `makeSignalObservations`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::ParseError;

/// Where a capture keeps the figures, root-relative.
pub const STATVFS_JSON: &str = ".gpudoctor/statvfs.json";

/// One filesystem's figures, as seen through one directory on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FsStat {
    /// `st_dev` of the directory: two directories with the same value sit on one filesystem.
    pub dev: u64,
    /// `f_frsize`: the unit `blocks` and `blocks_available` count in.
    pub fragment_size: u64,
    /// `f_blocks`: the filesystem's size in fragments.
    pub blocks: u64,
    /// `f_bavail`: fragments free to an unprivileged writer (root's reserve excluded), what
    /// the kubelet calls available.
    pub blocks_available: u64,
    /// `f_files`: inodes in all; 0 on filesystems without a fixed inode table (btrfs).
    pub files: u64,
    /// `f_ffree`: free inodes.
    pub files_free: u64,
}

impl FsStat {
    pub fn size_bytes(&self) -> u64 {
        self.blocks.saturating_mul(self.fragment_size)
    }
    pub fn available_bytes(&self) -> u64 {
        self.blocks_available.saturating_mul(self.fragment_size)
    }
    /// Available space over the size, 0..=1; `None` for a filesystem of no size (procfs-like).
    pub fn available_ratio(&self) -> Option<f64> {
        (self.blocks > 0)
            .then(|| self.blocks_available.min(self.blocks) as f64 / self.blocks as f64)
    }
    /// Free inodes over all inodes, 0..=1; `None` where the filesystem has no inode count
    /// (btrfs and others report `f_files` 0: the kubelet then has no inode signal either).
    pub fn inodes_free_ratio(&self) -> Option<f64> {
        (self.files > 0).then(|| self.files_free.min(self.files) as f64 / self.files as f64)
    }
}

/// One directory's answer: its figures, that the directory is not there (`{"missing": true}`
/// in a capture: a node without CRI-O has no `/var/lib/containers/storage`), or why it could
/// not be asked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum StatAnswer {
    Stat(FsStat),
    Missing { missing: bool },
    Failed { error: String },
}

/// `.gpudoctor/statvfs.json` read back.
pub fn parse_statvfs_json(text: &str) -> Result<BTreeMap<String, StatAnswer>, ParseError> {
    serde_json::from_str(text).map_err(|e| ParseError::new(format!("does not parse: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_and_errors_read_back() {
        let text = r#"{
  "var/lib/kubelet": {"dev": 2049, "fragment_size": 4096, "blocks": 1000, "blocks_available": 95, "files": 200, "files_free": 9},
  "var/log": {"error": "Permission denied (os error 13)"}
}"#;
        let map = parse_statvfs_json(text).unwrap();
        let StatAnswer::Stat(kubelet) = map["var/lib/kubelet"] else {
            panic!("{map:?}")
        };
        assert_eq!(kubelet.available_ratio(), Some(0.095));
        assert_eq!(kubelet.inodes_free_ratio(), Some(0.045));
        assert_eq!(kubelet.available_bytes(), 95 * 4096);
        assert_eq!(
            map["var/log"],
            StatAnswer::Failed {
                error: "Permission denied (os error 13)".to_string()
            }
        );
        let map =
            parse_statvfs_json(r#"{"var/lib/containers/storage": {"missing": true}}"#).unwrap();
        assert_eq!(
            map["var/lib/containers/storage"],
            StatAnswer::Missing { missing: true }
        );
    }

    #[test]
    fn no_size_and_no_inode_table_are_not_ratios() {
        let stat = FsStat {
            dev: 1,
            fragment_size: 4096,
            blocks: 0,
            blocks_available: 0,
            files: 0,
            files_free: 0,
        };
        assert_eq!(stat.available_ratio(), None);
        assert_eq!(stat.inodes_free_ratio(), None);
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        for text in ["", "[]", "{\"a\": 3}", "{\"a\": {\"dev\": -1}}", "\u{0}"] {
            assert!(parse_statvfs_json(text).is_err(), "{text:?}");
        }
    }
}

//! Why a root-relative path could not be read: every variant names the path, so a check can
//! turn it into an `error` result that says which file, and why.

use std::io;

use thiserror::Error;

/// Why a root-relative path could not be read. Every variant names the root-relative path.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum FsError {
    #[error("{path}: not found")]
    NotFound { path: String },
    #[error("{path}: dangling symlink ({link} -> {target})")]
    Dangling {
        path: String,
        link: String,
        target: String,
    },
    #[error("{path}: symlink {link} -> {target} leaves the root; refused")]
    EscapesRoot {
        path: String,
        link: String,
        target: String,
    },
    #[error("{path}: too many levels of symbolic links (loop?)")]
    Loop { path: String },
    #[error("{path}: permission denied")]
    PermissionDenied { path: String },
    #[error("{path}: not a regular file ({kind})")]
    NotAFile { path: String, kind: String },
    #[error("{path}: not a directory")]
    NotADirectory { path: String },
    #[error("{path}: larger than the {cap}-byte read cap")]
    TooLarge { path: String, cap: u64 },
    #[error("{path}: not text (binary or invalid UTF-8)")]
    NotText { path: String },
    #[error("{path}: {message}")]
    Io { path: String, message: String },
}

impl FsError {
    /// The root-relative path the error is about.
    pub fn path(&self) -> &str {
        match self {
            FsError::NotFound { path }
            | FsError::Dangling { path, .. }
            | FsError::EscapesRoot { path, .. }
            | FsError::Loop { path }
            | FsError::PermissionDenied { path }
            | FsError::NotAFile { path, .. }
            | FsError::NotADirectory { path }
            | FsError::TooLarge { path, .. }
            | FsError::NotText { path }
            | FsError::Io { path, .. } => path,
        }
    }

    /// True when the path simply is not there (absent attribute, dangling link): callers often
    /// treat that as "this fact is unknown" rather than as a damaged node.
    pub fn is_missing(&self) -> bool {
        matches!(self, FsError::NotFound { .. } | FsError::Dangling { .. })
    }

    pub(super) fn from_io(path: &str, err: &io::Error) -> FsError {
        match err.kind() {
            io::ErrorKind::NotFound => FsError::NotFound { path: path.into() },
            io::ErrorKind::PermissionDenied => FsError::PermissionDenied { path: path.into() },
            _ if err.raw_os_error() == Some(libc::ELOOP) => FsError::Loop { path: path.into() },
            _ => FsError::Io {
                path: path.into(),
                message: err.to_string(),
            },
        }
    }
}

//! Files gpudoctor writes besides stdout: the Prometheus textfile (`--textfile-dir`) and the saved
//! report (`--npd-report`, `--save-report`). Each is written atomically — a temporary file in the
//! same directory, synced, then renamed over the target — so node_exporter, NPD or a tailing
//! script never reads half a file (reference/kubernetes.md §10). Nothing here renders.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The file `--textfile-dir` writes. One fixed name: two gpudoctor files in one directory would
/// export the same series twice and node_exporter would reject the scrape.
pub const TEXTFILE_NAME: &str = "gpudoctor.prom";

/// Write `contents` to `path` atomically, readable by all (node_exporter often runs as
/// `nobody`; a temporary file is created 0600). The temporary name starts with the target's
/// name and a dot suffix (`gpudoctor.prom.XXXXXX`) so that it never matches `*.prom`.
pub fn write_atomically(path: &Path, contents: &[u8]) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a file path"))?;
    let mut prefix = name.to_os_string();
    prefix.push(".");
    let mut tmp = tempfile::Builder::new()
        .prefix(&prefix)
        .suffix(".tmp")
        .tempfile_in(dir)?;
    tmp.write_all(contents)?;
    tmp.as_file()
        .set_permissions(fs::Permissions::from_mode(0o644))?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Write the Prometheus text into `dir/gpudoctor.prom`; the directory must exist (it is
/// node_exporter's `--collector.textfile.directory`, not something to invent).
pub fn write_textfile(dir: &Path, text: &str) -> io::Result<PathBuf> {
    if !dir.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("{} is not a directory", dir.display()),
        ));
    }
    let path = dir.join(TEXTFILE_NAME);
    write_atomically(&path, text.as_bytes())?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_the_file_whole_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_textfile(dir.path(), "a 1\n").unwrap();
        assert_eq!(path, dir.path().join("gpudoctor.prom"));
        write_textfile(dir.path(), "a 2\n").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "a 2\n");
        let names: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec!["gpudoctor.prom"]);
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o644);
    }

    #[test]
    fn a_missing_directory_is_an_error_not_a_new_directory() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        assert!(write_textfile(&missing, "a 1\n").is_err());
        assert!(!missing.exists());
    }
}

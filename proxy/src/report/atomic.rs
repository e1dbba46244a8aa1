//! Writing a report file so that a reader, or a crash at any moment, sees the old file or
//! the whole new one and never a part: a temporary file in the same directory (a rename
//! across file systems is not atomic), fsync, rename over the target, fsync the directory.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The temporary name beside `path`: hidden, and ending `.tmp` so a half-written file is
/// never mistaken for a report.
pub fn temporary(path: &Path) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    path.with_file_name(format!(".{name}.tmp"))
}

/// The directory `path` is written into (`.` for a bare file name).
pub fn directory(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Whether [`write`] could write `path`: its temporary file can be created (and is removed
/// again). Asked at start, so that a report path nobody can write is not first found at stop.
pub fn check_writable(path: &Path) -> io::Result<()> {
    let tmp = temporary(path);
    File::create(&tmp)?;
    fs::remove_file(&tmp)
}

/// Replaces `path` with `body`, atomically and durably.
pub fn write(path: &Path, body: &[u8]) -> io::Result<()> {
    let tmp = temporary(path);
    let written = (|| {
        let mut file = File::create(&tmp)?;
        file.write_all(body)?;
        // The data must be on disk before the name points at it, or a crash could leave
        // the new name on an empty file.
        file.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written?;
    // The rename itself is durable once the directory is synced. Not every file system
    // lets a directory be opened for that; the file is in place either way.
    if let Ok(d) = File::open(directory(path)) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_the_file_whole_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        write(&path, b"first").unwrap();
        write(&path, b"second").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "second");
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["r.json"]);
    }

    #[test]
    fn a_failed_write_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        // The target is a directory: the rename fails after the temporary was written.
        let path = dir.path().join("taken");
        fs::create_dir(path.join("x").parent().unwrap()).unwrap();
        fs::write(path.join("x"), "").unwrap();
        assert!(write(&path, b"body").is_err());
        assert!(!temporary(&path).exists());
    }
}

//! Periodic snapshots of the report (`report.every`, `report.dir`, `report.keep`), so a
//! process that dies without a clean stop (SIGKILL, the OOM killer) still leaves its last
//! one. Each is `rttscope-report-<UTC time>.<ext>`, written through [`atomic`](super::atomic),
//! and names sort by time, so rotation deletes the lexically first. A failed write is one
//! warning; recording and forwarding go on.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use rttscope_config::ReportFormat;
use tokio_util::sync::CancellationToken;

use super::{Report, atomic, render};

const PREFIX: &str = "rttscope-report-";

/// Where and how snapshots are written.
#[derive(Clone, Debug)]
pub struct Snapshots {
    /// `report.dir`, created at the first write; rotation and the clean-up of leftovers assume no
    /// other process writes there.
    pub dir: PathBuf,
    /// `report.format`: the rendering, and the file extension (`json`, `txt`, `html`) rotation
    /// counts by.
    pub format: ReportFormat,
    /// Snapshots kept; older ones are deleted after each write.
    pub keep: usize,
}

/// The file extension for a format.
fn extension(format: ReportFormat) -> &'static str {
    match format {
        ReportFormat::Json => "json",
        ReportFormat::Text => "txt",
        ReportFormat::Html => "html",
    }
}

/// `rttscope-report-20261126T053752.123Z.json`: RFC 3339 without the `-` and `:` that
/// some tools mind in file names, still sorting by time.
pub fn file_name(at: SystemTime, format: ReportFormat) -> String {
    let stamp: String =
        humantime::format_rfc3339_millis(at).to_string().chars().filter(|c| !"-:".contains(*c)).collect();
    format!("{PREFIX}{stamp}.{}", extension(format))
}

impl Snapshots {
    /// Writes `report` as a new snapshot, deleting the oldest first so that no more than
    /// `keep` are ever there, not even for the moment between a write and its rotation (a
    /// test polling the directory under load saw `keep + 1`).
    pub fn write(&self, report: &Report, at: SystemTime) -> io::Result<PathBuf> {
        let body = render(report, self.format).map_err(io::Error::other)?;
        fs::create_dir_all(&self.dir)?;
        let path = self.dir.join(file_name(at, self.format));
        self.rotate(self.keep.saturating_sub(1))?;
        atomic::write(&path, body.as_bytes())?;
        Ok(path)
    }

    /// This format's snapshots in the directory, oldest first.
    pub fn list(&self) -> io::Result<Vec<PathBuf>> {
        let suffix = format!(".{}", extension(self.format));
        let mut found: Vec<PathBuf> = fs::read_dir(&self.dir)?
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(PREFIX) && n.ends_with(&suffix))
            })
            .collect();
        found.sort();
        Ok(found)
    }

    /// Deletes all but the newest `keep` snapshots.
    fn rotate(&self, keep: usize) -> io::Result<()> {
        let all = self.list()?;
        for old in &all[..all.len().saturating_sub(keep)] {
            fs::remove_file(old)?;
        }
        Ok(())
    }

    /// Temporary files a killed predecessor left mid-write: never reports, safe to delete
    /// before the first write (one process writes to a directory).
    fn remove_leftovers(&self) {
        let Ok(entries) = fs::read_dir(&self.dir) else { return };
        for path in entries.filter_map(|e| e.ok().map(|e| e.path())) {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if name.starts_with(&format!(".{PREFIX}")) && name.ends_with(".tmp") {
                let _ = fs::remove_file(&path);
            }
        }
    }
}

/// Writes a snapshot of `report()` every `every` until `stop`. Rendering and file I/O run
/// on the blocking pool, never on a runtime thread the relay uses.
pub async fn run(
    every: Duration,
    snapshots: Snapshots,
    report: Arc<dyn Fn() -> Report + Send + Sync>,
    stop: CancellationToken,
) {
    let snapshots = Arc::new(snapshots);
    {
        let s = snapshots.clone();
        let _ = tokio::task::spawn_blocking(move || s.remove_leftovers()).await;
    }
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    // After a stall, one snapshot, not a burst of them.
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = ticks.tick() => {}
        }
        let (s, report) = (snapshots.clone(), report.clone());
        let written = tokio::task::spawn_blocking(move || s.write(&report(), SystemTime::now())).await;
        match written {
            Ok(Ok(path)) => tracing::debug!(path = %path.display(), "report snapshot written"),
            Ok(Err(e)) => {
                tracing::warn!(dir = %snapshots.dir.display(), error = %e, "cannot write a report snapshot")
            }
            Err(e) => tracing::warn!(error = %e, "the report snapshot task failed"),
        }
    }
}

/// Whether `path` names one of the snapshots (for tests and tools that read a directory).
pub fn is_snapshot(path: &Path) -> bool {
    path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(PREFIX) && !n.ends_with(".tmp"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_sort_by_time_and_carry_the_format() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_millis(1_795_000_000_123);
        assert_eq!(file_name(t, ReportFormat::Json), "rttscope-report-20261118T110640.123Z.json");
        assert_eq!(file_name(t, ReportFormat::Text), "rttscope-report-20261118T110640.123Z.txt");
        let later = file_name(t + Duration::from_secs(1), ReportFormat::Html);
        assert!(file_name(t, ReportFormat::Html) < later);
    }

    #[test]
    fn rotation_keeps_the_newest_and_only_touches_its_own_files() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("unrelated.json"), "{}").unwrap();
        let s = Snapshots { dir: dir.path().join("sub"), format: ReportFormat::Json, keep: 3 };
        let report = crate::report::tests::full_report();
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_000_000);
        let mut written = Vec::new();
        for i in 0..5 {
            written.push(s.write(&report, t + Duration::from_secs(i)).unwrap());
        }
        assert_eq!(s.list().unwrap(), written[2..]);
        assert!(dir.path().join("unrelated.json").exists());
        // Room is made before the write: a write that fails (its name taken by a directory)
        // leaves keep - 1, never a moment with keep + 1.
        let blocked = t + Duration::from_secs(9);
        fs::create_dir(s.dir.join(file_name(blocked, ReportFormat::Json))).unwrap();
        assert!(s.write(&report, blocked).is_err());
        assert_eq!(s.list().unwrap().len(), 2, "keep - 1: the blocking entry and the newest snapshot");
        let back: Report = serde_json::from_str(&fs::read_to_string(&written[4]).unwrap()).unwrap();
        assert_eq!(back, report);
    }
}

//! A machine whose CPUs are all busy with other work: one busy loop per CPU, at the normal
//! priority, for as long as the value lives. What an application host running a CPU-bound
//! service looks like to rttscope beside it.

use std::io;
use std::process::{Child, Command};

/// The busy loops; killed (and reaped) when dropped.
pub struct CpuHog(Vec<Child>);

impl CpuHog {
    /// One busy loop per CPU this process may run on.
    pub fn start() -> io::Result<CpuHog> {
        let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
        let mut hog = CpuHog(Vec::with_capacity(cpus));
        for _ in 0..cpus {
            hog.0.push(Command::new("sh").args(["-c", "while :; do :; done"]).spawn()?);
        }
        Ok(hog)
    }

    /// How many busy loops run.
    pub fn loops(&self) -> usize {
        self.0.len()
    }
}

impl Drop for CpuHog {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

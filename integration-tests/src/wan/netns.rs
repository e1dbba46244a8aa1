//! Named network namespaces: creation and removal through `ip netns`, entering one from a
//! thread, and removing the leftovers of crashed runs.

use std::io;
use std::path::PathBuf;
use std::process::Command;

use super::sys;

/// Every namespace the emulator creates is named `rtts-<owner pid>-<link>-<side>`.
pub const PREFIX: &str = "rtts-";
/// Where `ip netns` bind-mounts named namespaces (iproute2's NETNS_RUN_DIR).
const NETNS_DIR: &str = "/var/run/netns";

/// The bind-mount path of namespace `name`, which `setns` accepts.
pub fn path(name: &str) -> PathBuf {
    PathBuf::from(NETNS_DIR).join(name)
}

/// Runs `ip ARGS…` to completion; a non-zero exit becomes an error carrying ip's stderr.
pub fn ip(args: &[&str]) -> io::Result<()> {
    let out = Command::new("ip").args(args).output()?;
    if out.status.success() {
        return Ok(());
    }
    Err(io::Error::other(format!(
        "`ip {}` failed ({}): {}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    )))
}

/// A named network namespace that is deleted when dropped.
#[derive(Debug)]
pub struct Netns {
    name: String,
}

impl Netns {
    /// Creates namespace `name` with its loopback up.
    pub fn create(name: String) -> io::Result<Netns> {
        ip(&["netns", "add", &name])?;
        // From here on Drop removes it, even if the rest fails.
        let ns = Netns { name };
        ip(&["-n", &ns.name, "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// The namespace's name, as `ip netns list` shows it.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Unmounting the name frees the namespace once nothing else holds it: our TUN fds are
        // closed before this runs, but a process started inside it keeps it alive until exit.
        if let Err(e) = ip(&["netns", "delete", &self.name]) {
            eprintln!("wan: could not delete namespace {}: {e}", self.name);
        }
    }
}

/// Runs `f` on a fresh thread that has entered namespace `name`, and returns its result.
/// Sockets keep the namespace they were created in, so a listener or stream made here can be
/// used from any thread afterwards. A panic in `f` is propagated to the caller.
pub fn run_in<T: Send, F: FnOnce() -> T + Send>(name: &str, f: F) -> io::Result<T> {
    let ns_path = path(name);
    std::thread::scope(|s| {
        let handle =
            std::thread::Builder::new().name(format!("in-{name}")).spawn_scoped(s, move || -> io::Result<T> {
                sys::enter_netns(&ns_path)?;
                Ok(f())
            })?;
        match handle.join() {
            Ok(result) => result,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

/// Deletes namespaces named `rtts-<pid>-…` whose owner process no longer exists: the
/// remains of a run that was killed or aborted before its Drop could run. A reused pid makes
/// us skip a stale namespace, never delete a live one. Returns the names removed.
pub fn cleanup_stale() -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(NETNS_DIR) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(owner) = owner_pid(&name) else {
            continue;
        };
        if !sys::pid_alive(owner) && ip(&["netns", "delete", &name]).is_ok() {
            removed.push(name);
        }
    }
    removed
}

/// The owner pid encoded in one of our namespace names, or None for anyone else's.
fn owner_pid(name: &str) -> Option<i32> {
    let rest = name.strip_prefix(PREFIX)?;
    let (pid, _) = rest.split_once('-')?;
    pid.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::owner_pid;

    #[test]
    fn owner_pid_parses_only_our_names() {
        assert_eq!(owner_pid("rtts-1234-0-srv"), Some(1234));
        assert_eq!(owner_pid("rtts-x-0-srv"), None);
        assert_eq!(owner_pid("rtts-1234"), None);
        assert_eq!(owner_pid("other-1234-0-srv"), None);
    }
}

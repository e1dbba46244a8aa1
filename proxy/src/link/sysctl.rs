//! The host's TCP buffer limits, read at start-up: the ceilings that
//! autotuning cannot pass, and that no fix on the application side can lift.

use std::path::Path;

use serde::Serialize;

/// The host's TCP buffer sysctls; each `None` when `/proc/sys` could not be read or parsed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Sysctls {
    /// `net.ipv4.tcp_rmem` min/default/max.
    pub tcp_rmem: Option<[u64; 3]>,
    /// `net.ipv4.tcp_wmem` min/default/max, bytes.
    pub tcp_wmem: Option<[u64; 3]>,
    /// `net.core.rmem_max`, bytes: the ceiling for an explicit SO_RCVBUF.
    pub rmem_max: Option<u64>,
    /// `net.core.wmem_max`, bytes: the ceiling for an explicit SO_SNDBUF.
    pub wmem_max: Option<u64>,
    /// `net.ipv4.tcp_moderate_rcvbuf`: whether receive-buffer autotuning is on.
    pub tcp_moderate_rcvbuf: Option<bool>,
    /// `net.ipv4.tcp_window_scaling`: off caps every window at 64 KiB.
    pub tcp_window_scaling: Option<bool>,
}

fn read(root: &Path, key: &str) -> Option<String> {
    std::fs::read_to_string(root.join(key.replace('.', "/"))).ok()
}

fn triple(s: &str) -> Option<[u64; 3]> {
    let v: Vec<u64> = s.split_whitespace().filter_map(|x| x.parse().ok()).collect();
    Some([*v.first()?, *v.get(1)?, *v.get(2)?])
}

impl Sysctls {
    /// Reads from `/proc/sys` (or another root, for tests).
    pub fn read_from(root: &Path) -> Sysctls {
        let num = |k: &str| read(root, k).and_then(|s| s.trim().parse::<u64>().ok());
        Sysctls {
            tcp_rmem: read(root, "net.ipv4.tcp_rmem").as_deref().and_then(triple),
            tcp_wmem: read(root, "net.ipv4.tcp_wmem").as_deref().and_then(triple),
            rmem_max: num("net.core.rmem_max"),
            wmem_max: num("net.core.wmem_max"),
            tcp_moderate_rcvbuf: num("net.ipv4.tcp_moderate_rcvbuf").map(|v| v != 0),
            tcp_window_scaling: num("net.ipv4.tcp_window_scaling").map(|v| v != 0),
        }
    }

    /// Reads the running host's `/proc/sys`.
    pub fn read() -> Sysctls {
        Sysctls::read_from(Path::new("/proc/sys"))
    }

    /// The largest receive window autotuning can reach here. Linux gives
    /// the window a share of the buffer (tcp_adv_win_scale); about half is
    /// the conservative figure the background articles use.
    pub fn max_receive_window(&self) -> Option<u64> {
        self.tcp_rmem.map(|[_, _, max]| max / 2)
    }

    /// What is wrong for a link of `bdp` bytes (bandwidth × RTT), if anything.
    pub fn problems(&self, bdp: u64) -> Vec<String> {
        let mut out = Vec::new();
        if self.tcp_window_scaling == Some(false) {
            out.push("net.ipv4.tcp_window_scaling is 0: no window can exceed 64 KiB; set it to 1".to_owned());
        }
        if self.tcp_moderate_rcvbuf == Some(false) {
            out.push("net.ipv4.tcp_moderate_rcvbuf is 0: receive buffers do not grow; set it to 1".to_owned());
        }
        let need = 2 * bdp;
        if let Some([_, _, max]) = self.tcp_rmem
            && max < need
        {
            out.push(format!("net.ipv4.tcp_rmem max is {max}, below 2 × BDP ({need}): raise it to at least {need}"));
        }
        if let Some([_, _, max]) = self.tcp_wmem
            && max < need
        {
            out.push(format!("net.ipv4.tcp_wmem max is {max}, below 2 × BDP ({need}): raise it to at least {need} (it bounds what this host can send per round trip)"));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_values_and_finds_ceilings_below_the_bdp() {
        let root = tempfile::tempdir().unwrap();
        let write = |k: &str, v: &str| {
            let path = root.path().join(k.replace('.', "/"));
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, v).unwrap();
        };
        write("net.ipv4.tcp_rmem", "4096\t131072\t6291456\n");
        write("net.ipv4.tcp_wmem", "4096 16384 16384\n");
        write("net.core.rmem_max", "212992\n");
        write("net.ipv4.tcp_window_scaling", "1\n");
        let s = Sysctls::read_from(root.path());
        assert_eq!(s.tcp_rmem, Some([4096, 131072, 6291456]));
        assert_eq!((s.rmem_max, s.wmem_max, s.tcp_window_scaling), (Some(212992), None, Some(true)));
        // 100 Mbit/s × 20 ms = 250 KB: the 16 KiB wmem cannot cover it.
        let problems = s.problems(250_000);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("tcp_wmem max is 16384"));
    }
}

//! Where clients connect: TCP listeners and Unix sockets, side by side. A Unix socket's
//! file gets the configured permissions; a stale one left by a process that died is
//! replaced, one that another process still listens on is an error, and anything that
//! is not a socket is never removed. The file goes when rttscope stops.

use std::io;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::task::{Context, Poll};

use rttscope_config::ListenAddr;
use tokio::net::{TcpListener, UnixListener};

use super::leg::Transport;

/// One listening socket.
pub(super) enum Listener {
    Tcp(TcpListener),
    Unix { listener: UnixListener, path: PathBuf },
}

impl Listener {
    /// Binds `addr`; a Unix socket gets permissions `mode`.
    pub(super) async fn bind(addr: &ListenAddr, mode: u32) -> io::Result<Listener> {
        match addr {
            ListenAddr::Tcp(addr) => Ok(Listener::Tcp(TcpListener::bind(addr).await?)),
            ListenAddr::Unix(path) => {
                clear_stale(path)?;
                let listener = UnixListener::bind(path).map_err(|e| match path.parent() {
                    // The kernel's "No such file or directory" does not say which is missing.
                    Some(dir) if e.kind() == io::ErrorKind::NotFound && !dir.is_dir() => io::Error::new(
                        io::ErrorKind::NotFound,
                        format!("the directory {} does not exist (rttscope does not create it)", dir.display()),
                    ),
                    _ => e,
                })?;
                std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
                Ok(Listener::Unix { listener, path: path.clone() })
            }
        }
    }

    /// What `/connections`, logs and tests call this listener.
    pub(super) fn describe(&self) -> String {
        match self {
            Listener::Tcp(l) => l.local_addr().map_or_else(|e| format!("tcp ({e})"), |a| a.to_string()),
            Listener::Unix { path, .. } => format!("unix:{}", path.display()),
        }
    }

    /// The TCP address, for a TCP listener.
    pub(super) fn tcp_addr(&self) -> Option<std::net::SocketAddr> {
        match self {
            Listener::Tcp(l) => l.local_addr().ok(),
            Listener::Unix { .. } => None,
        }
    }

    /// The next client: its stream and how to name it.
    pub(super) fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<(Transport, String)>> {
        match self {
            Listener::Tcp(l) => l.poll_accept(cx).map_ok(|(stream, peer)| (Transport::Tcp(stream), peer.to_string())),
            Listener::Unix { listener, path } => listener
                .poll_accept(cx)
                .map_ok(|(stream, _)| (Transport::Unix(stream), format!("unix:{}", path.display()))),
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Listener::Unix { path, .. } = self {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Removes a socket file nobody listens on; refuses to touch a live one or a non-socket.
fn clear_stale(path: &Path) -> io::Result<()> {
    let Ok(meta) = std::fs::symlink_metadata(path) else { return Ok(()) };
    if !meta.file_type().is_socket() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("{} exists and is not a socket; not removing it", path.display()),
        ));
    }
    match std::os::unix::net::UnixStream::connect(path) {
        Ok(_) => Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            format!("{} is in use: another process listens on it", path.display()),
        )),
        Err(_) => {
            tracing::info!(path = %path.display(), "removing a stale socket file");
            std::fs::remove_file(path)
        }
    }
}

//! A loopback port in the test's own namespace that forwards each connection to an address
//! inside a link's namespace, so clients that dial an address (mysql_async, the admin
//! client) reach rttscope run there.
//!
//! One thread per direction, half-closes passed on: EOF from one side becomes
//! `shutdown(Write)` towards the other, so the bridge adds no fault of its own.

use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use super::netns;

/// A running bridge; stops accepting on drop (open connections run until either end closes).
pub struct Bridge {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

impl Bridge {
    /// Listens on 127.0.0.1:0 here; each connection is dialled to `target` from inside `ns`.
    pub(super) fn start(ns: &str, target: SocketAddr) -> io::Result<Bridge> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let (ns, stop2) = (ns.to_owned(), stop.clone());
        let acceptor = std::thread::Builder::new().name("wan-bridge".into()).spawn(move || {
            for near in listener.incoming() {
                if stop2.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(near) = near else { continue };
                // A failed dial closes the near side: the client sees the refusal as a close.
                let Ok(Ok(far)) = netns::run_in(&ns, || TcpStream::connect(target)) else { continue };
                let _ = near.set_nodelay(true);
                let _ = far.set_nodelay(true);
                let _ = splice(near, far);
            }
        })?;
        Ok(Bridge { addr, stop, acceptor: Some(acceptor) })
    }

    /// Where to connect, in the test's namespace.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

/// Copies both ways on two threads, passing each EOF on as a half-close.
fn splice(a: TcpStream, b: TcpStream) -> io::Result<()> {
    for (mut from, mut to) in [(a.try_clone()?, b.try_clone()?), (b, a)] {
        std::thread::spawn(move || {
            let _ = io::copy(&mut from, &mut to);
            let _ = to.shutdown(Shutdown::Write);
        });
    }
    Ok(())
}

impl Drop for Bridge {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept so the thread sees the flag.
        let _ = TcpStream::connect(self.addr);
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
    }
}

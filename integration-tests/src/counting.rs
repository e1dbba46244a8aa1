//! A byte-counting TCP relay to put between a client and rttscope, so a
//! test knows exactly how many bytes the client sent and received.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[derive(Clone, Default)]
pub struct Counters {
    pub to_server: Arc<AtomicU64>,
    pub to_client: Arc<AtomicU64>,
}

impl Counters {
    /// `(bytes client → server, bytes server → client)` so far.
    pub fn get(&self) -> (u64, u64) {
        (self.to_server.load(Ordering::SeqCst), self.to_client.load(Ordering::SeqCst))
    }
}

/// Listens on 127.0.0.1 and relays every connection to `target`, counting.
pub async fn counting_relay(target: SocketAddr) -> (SocketAddr, Counters) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let counters = Counters::default();
    let c = counters.clone();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(server) = TcpStream::connect(target).await else { continue };
            let _ = client.set_nodelay(true);
            let _ = server.set_nodelay(true);
            let (cr, cw) = client.into_split();
            let (sr, sw) = server.into_split();
            tokio::spawn(pipe(cr, sw, c.to_server.clone()));
            tokio::spawn(pipe(sr, cw, c.to_client.clone()));
        }
    });
    (addr, counters)
}

async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    count: Arc<AtomicU64>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                // Count before forwarding: once the peer has the bytes, the count includes them.
                count.fetch_add(n as u64, Ordering::SeqCst);
                if to.write_all(&buf[..n]).await.is_err() {
                    break;
                }
            }
        }
    }
    let _ = to.shutdown().await;
}

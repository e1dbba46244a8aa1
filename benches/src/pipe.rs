//! The baseline relay: accept, dial, `copy_bidirectional`, nothing parsed or recorded.
//! Run as a child (`rttscope-bench --raw-pipe-listen … --raw-pipe-upstream …`) on the same
//! tokio runtime settings as rttscope, it shows what any userspace relay costs on this
//! machine; rttscope's own overhead is what it adds on top.

use std::net::SocketAddr;

use anyhow::{Context, Result};
use tokio::net::{TcpListener, TcpStream};

/// rttscope's default `relay.buffer_size`, so both copy in the same steps.
const BUFFER: usize = 32 * 1024;

/// Relays every connection to `listen` to `upstream` until the process is killed.
pub async fn serve(listen: SocketAddr, upstream: SocketAddr) -> Result<()> {
    let listener = TcpListener::bind(listen).await.with_context(|| format!("binding {listen}"))?;
    loop {
        let (mut client, _) = listener.accept().await?;
        tokio::spawn(async move {
            // A failed dial or a reset just ends this connection, as in any relay.
            let Ok(mut server) = TcpStream::connect(upstream).await else { return };
            let _ = client.set_nodelay(true);
            let _ = server.set_nodelay(true);
            let _ = tokio::io::copy_bidirectional_with_sizes(&mut client, &mut server, BUFFER, BUFFER).await;
        });
    }
}

//! A TCP proxy in front of the test Redis whose replies a test can hold back: every command
//! still reaches Redis and is carried out, but its answer waits until the test releases it. So
//! a client's response timeout fires on a command Redis already ran, as on a loaded machine or
//! a congested network, and a test can show what the engine does with an answer it never got.

use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::test_url;

/// The proxy; it stops (and closes every connection through it) when dropped.
pub struct ReplyHold {
    url: String,
    held: Arc<watch::Sender<bool>>,
    _connections: JoinSet<()>,
}

impl ReplyHold {
    /// A proxy to the test Redis ([`test_url`]) on a free local port, passing replies on.
    pub async fn start() -> ReplyHold {
        let upstream = test_url();
        let (scheme, rest) = upstream
            .split_once("://")
            .expect("the test Redis URL has a scheme");
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let (userinfo, address) = match authority.rsplit_once('@') {
            Some((user, address)) => (format!("{user}@"), address.to_owned()),
            None => (String::new(), authority.to_owned()),
        };
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("local address").port();
        let held = Arc::new(watch::channel(false).0);
        let mut connections = JoinSet::new();
        let accepting = held.clone();
        connections.spawn(async move {
            let mut pipes = JoinSet::new();
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(&address).await else {
                    continue;
                };
                pipes.spawn(pipe(client, server, accepting.subscribe()));
            }
        });
        ReplyHold {
            url: format!("{scheme}://{userinfo}127.0.0.1:{port}{path}"),
            held,
            _connections: connections,
        }
    }

    /// The URL to connect through the proxy.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// From now on, Redis's answers wait at the proxy (commands still go through).
    pub fn hold(&self) {
        self.held.send_replace(true);
    }

    /// Passes the answers held back, and every later one, on.
    pub fn release(&self) {
        self.held.send_replace(false);
    }
}

/// Carries one connection: commands straight through, answers only while not held.
async fn pipe(client: TcpStream, server: TcpStream, mut held: watch::Receiver<bool>) {
    let (mut from_client, mut to_client) = client.into_split();
    let (mut from_server, mut to_server) = server.into_split();
    let commands = async move {
        let _ = tokio::io::copy(&mut from_client, &mut to_server).await;
    };
    let answers = async move {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = match from_server.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            if held.wait_for(|held| !held).await.is_err()
                || to_client.write_all(&buf[..n]).await.is_err()
            {
                return;
            }
        }
    };
    // Either side closing ends the connection, as a client's timeout closing it does.
    tokio::select! {
        () = commands => {}
        () = answers => {}
    }
}

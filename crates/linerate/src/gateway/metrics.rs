//! The Prometheus listener: `GET /metrics` answered with the text exposition the
//! worker makes (see `report`). One connection at a time, each with short timeouts,
//! on its own thread: a scrape never waits on the packet path longer than one
//! control request does, and a stuck client holds only itself.

use crate::worker::{Control, ControlRequest};
use io::Waker;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

/// Longest request head read.
const MAX_HEAD: usize = 8192;
const TIMEOUT: Duration = Duration::from_secs(5);

/// Listens on `addr` and serves scrapes until the process ends.
pub fn serve(
    addr: SocketAddr,
    to_worker: mpsc::Sender<ControlRequest>,
    waker: Arc<Waker>,
) -> Result<(), String> {
    let listener =
        TcpListener::bind(addr).map_err(|e| format!("metrics: listening on {addr}: {e}"))?;
    std::thread::Builder::new()
        .name("metrics".into())
        .spawn(move || {
            for conn in listener.incoming().flatten() {
                let _ = scrape(conn, &to_worker, &waker);
            }
        })
        .map_err(|e| format!("starting the metrics thread: {e}"))?;
    Ok(())
}

fn scrape(
    conn: TcpStream,
    to_worker: &mpsc::Sender<ControlRequest>,
    waker: &Waker,
) -> std::io::Result<()> {
    conn.set_read_timeout(Some(TIMEOUT))?;
    conn.set_write_timeout(Some(TIMEOUT))?;
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut first = String::new();
    reader.read_line(&mut first)?;
    let mut read = first.len();
    loop {
        let mut line = String::new();
        let n = reader.read_line(&mut line)?;
        read += n;
        if n == 0 || line == "\r\n" || line == "\n" || read > MAX_HEAD {
            break;
        }
    }
    let mut words = first.split_whitespace();
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let mut out = conn;
    if method != "GET" || !(target == "/metrics" || target.starts_with("/metrics?")) {
        let body = "only GET /metrics is served here\n";
        return write!(
            out,
            "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
    }
    let (reply_tx, reply_rx) = mpsc::sync_channel(1);
    let asked = to_worker.send(ControlRequest {
        what: Control::Show("metrics".into()),
        reply: reply_tx,
    });
    let _ = waker.wake();
    let body = match asked
        .ok()
        .and_then(|()| reply_rx.recv_timeout(TIMEOUT).ok())
    {
        // The worker's reply ends with the control protocol's errno line.
        Some(text) => text.split("errno=").next().unwrap_or("").to_string(),
        None => {
            let body = "the gateway's worker did not answer\n";
            return write!(
                out,
                "HTTP/1.1 503 Service Unavailable\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    };
    write!(
        out,
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

//! The Prometheus listener: `GET /metrics` (and `HEAD /metrics`) answered with the
//! text exposition the worker makes (see `report`).
//!
//! Each connection is served on a thread of its own, at most `MAX_CONNECTIONS` at
//! once, and each has one deadline for its whole request: reading the head,
//! asking the worker, writing the answer. So an idle client, or one that sends a
//! byte a second, holds only its own thread for at most `DEADLINE`, and a scrape
//! beside it is answered at once. Past the bound a connection gets a 503 and is
//! closed. (A small HTTP server crate was weighed; the well-kept ones either
//! spawn without bound or give no deadline per request, which are the two things
//! this listener is for.)

use crate::control::request::{Control, ControlRequest};
use io::Waker;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Longest request head read.
const MAX_HEAD: usize = 8192;
/// The whole of one request, from accept to the last byte written.
const DEADLINE: Duration = Duration::from_secs(5);
/// Connections served at once.
const MAX_CONNECTIONS: usize = 16;

/// Listens on `addr` and serves scrapes until the process ends.
pub fn serve(
    addr: SocketAddr,
    to_worker: mpsc::Sender<ControlRequest>,
    waker: Arc<Waker>,
) -> Result<(), String> {
    let listener =
        TcpListener::bind(addr).map_err(|e| format!("metrics: listening on {addr}: {e}"))?;
    serve_on(listener, to_worker, waker)
}

fn serve_on(
    listener: TcpListener,
    to_worker: mpsc::Sender<ControlRequest>,
    waker: Arc<Waker>,
) -> Result<(), String> {
    let active = Arc::new(AtomicUsize::new(0));
    std::thread::Builder::new()
        .name("metrics".into())
        .spawn(move || {
            for conn in listener.incoming().flatten() {
                if active.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
                    active.fetch_sub(1, Ordering::AcqRel);
                    refuse_busy(conn);
                    continue;
                }
                let (to_worker, waker, held) = (to_worker.clone(), waker.clone(), active.clone());
                let spawned = std::thread::Builder::new()
                    .name("metrics-conn".into())
                    .spawn(move || {
                        let _ = answer(conn, Instant::now() + DEADLINE, &to_worker, &waker);
                        held.fetch_sub(1, Ordering::AcqRel);
                    });
                if spawned.is_err() {
                    active.fetch_sub(1, Ordering::AcqRel);
                }
            }
        })
        .map_err(|e| format!("starting the metrics thread: {e}"))?;
    Ok(())
}

/// Tells a client past the bound to come back, without waiting on it.
fn refuse_busy(conn: TcpStream) {
    let _ = conn.set_nonblocking(true);
    let _ = reply(
        &conn,
        "503 Service Unavailable",
        "text/plain",
        "too many metrics connections at once\n",
        true,
    );
}

/// How long is left until `deadline`, or a timeout error once it has passed.
fn left(deadline: Instant) -> std::io::Result<Duration> {
    let d = deadline.saturating_duration_since(Instant::now());
    if d.is_zero() {
        return Err(std::io::ErrorKind::TimedOut.into());
    }
    Ok(d)
}

/// The request head (up to the blank line, at most `MAX_HEAD` bytes), read by
/// `deadline` however the client spreads its bytes.
fn read_head(conn: &mut TcpStream, deadline: Instant) -> std::io::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    loop {
        conn.set_read_timeout(Some(left(deadline)?))?;
        let n = conn.read(&mut chunk)?;
        if n == 0 {
            return Ok(head);
        }
        head.extend_from_slice(&chunk[..n]);
        if head.windows(4).any(|w| w == b"\r\n\r\n")
            || head.windows(2).any(|w| w == b"\n\n")
            || head.len() > MAX_HEAD
        {
            return Ok(head);
        }
    }
}

fn answer(
    mut conn: TcpStream,
    deadline: Instant,
    to_worker: &mpsc::Sender<ControlRequest>,
    waker: &Waker,
) -> std::io::Result<()> {
    let head = read_head(&mut conn, deadline)?;
    let first = head.split(|&b| b == b'\n').next().unwrap_or(&[]);
    let first = String::from_utf8_lossy(first);
    let mut words = first.split_whitespace();
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    conn.set_write_timeout(Some(left(deadline)?))?;
    let head_only = method == "HEAD";
    if !(target == "/metrics" || target.starts_with("/metrics?")) {
        let body = "only /metrics is served here\n";
        return reply(&conn, "404 Not Found", "text/plain", body, head_only);
    }
    if method != "GET" && !head_only {
        let body = "only GET and HEAD are served here\n";
        return reply(&conn, "405 Method Not Allowed", "text/plain", body, false);
    }
    let (reply_tx, reply_rx) = mpsc::sync_channel(1);
    let asked = to_worker.send(ControlRequest {
        what: Control::Show("metrics".into()),
        reply: reply_tx,
    });
    let _ = waker.wake();
    let text = asked
        .ok()
        .and_then(|()| reply_rx.recv_timeout(left(deadline).ok()?).ok());
    conn.set_write_timeout(Some(left(deadline)?))?;
    match text {
        // The worker's reply ends with the control protocol's errno line.
        Some(text) => {
            let body = text.split("errno=").next().unwrap_or("");
            reply(
                &conn,
                "200 OK",
                "text/plain; version=0.0.4",
                body,
                head_only,
            )
        }
        None => {
            let body = "the gateway's worker did not answer\n";
            reply(
                &conn,
                "503 Service Unavailable",
                "text/plain",
                body,
                head_only,
            )
        }
    }
}

fn reply(
    mut conn: &TcpStream,
    status: &str,
    kind: &str,
    body: &str,
    head_only: bool,
) -> std::io::Result<()> {
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    if !head_only {
        out.push_str(body);
    }
    conn.write_all(out.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A listener on a free loopback port whose "worker" answers every request with
    /// `body`.
    fn listener(body: &'static str) -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let (tx, rx) = mpsc::channel::<ControlRequest>();
        std::thread::spawn(move || {
            for req in rx {
                let _ = req.reply.send(format!("{body}errno=0\n\n"));
            }
        });
        serve_on(l, tx, Arc::new(Waker::new().unwrap())).unwrap();
        addr
    }

    fn ask(addr: SocketAddr, request: &str) -> String {
        let mut c = TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        if !request.is_empty() {
            c.write_all(request.as_bytes()).unwrap();
        }
        let mut out = String::new();
        c.read_to_string(&mut out).unwrap();
        out
    }

    #[test]
    fn a_scrape_is_answered_beside_idle_and_slow_clients() {
        let addr = listener("linerate_up 1\n");
        // Five clients that never send, and one that sends a byte at a time.
        let idle: Vec<TcpStream> = (0..5).map(|_| TcpStream::connect(addr).unwrap()).collect();
        let mut slow = TcpStream::connect(addr).unwrap();
        slow.write_all(b"G").unwrap();
        let t = Instant::now();
        let out = ask(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
        assert!(out.ends_with("\r\n\r\nlinerate_up 1\n"), "{out}");
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "answered after {:?}",
            t.elapsed()
        );
        drop(idle);
        drop(slow);
    }

    #[test]
    fn a_slow_client_is_cut_off_at_the_deadline() {
        let addr = listener("x 1\n");
        let mut slow = TcpStream::connect(addr).unwrap();
        let t = Instant::now();
        // A byte every 300 ms never finishes its head; the server closes at the deadline.
        let mut closed = false;
        for _ in 0..40 {
            if slow.write_all(b"X").is_err() {
                closed = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(300));
            slow.set_read_timeout(Some(Duration::from_millis(1)))
                .unwrap();
            let mut b = [0u8; 1];
            if matches!(slow.read(&mut b), Ok(0)) {
                closed = true;
                break;
            }
        }
        assert!(closed, "still open after {:?}", t.elapsed());
        assert!(t.elapsed() < DEADLINE + Duration::from_secs(2));
    }

    #[test]
    fn head_has_the_length_and_no_body_and_other_requests_are_refused() {
        let addr = listener("linerate_up 1\n");
        let out = ask(addr, "HEAD /metrics HTTP/1.1\r\n\r\n");
        assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
        assert!(out.contains("Content-Length: 14\r\n"), "{out}");
        assert!(out.ends_with("\r\n\r\n"), "{out}");
        let out = ask(addr, "GET / HTTP/1.1\r\n\r\n");
        assert!(out.starts_with("HTTP/1.1 404"), "{out}");
        let out = ask(addr, "POST /metrics HTTP/1.1\r\n\r\n");
        assert!(out.starts_with("HTTP/1.1 405"), "{out}");
    }

    #[test]
    fn connections_past_the_bound_are_told_so_at_once() {
        let addr = listener("x 1\n");
        let held: Vec<TcpStream> = (0..MAX_CONNECTIONS)
            .map(|_| TcpStream::connect(addr).unwrap())
            .collect();
        // The accept thread takes connections in order, so these are counted first.
        // (Nothing is sent: a reply to an unread request may reach us as a reset.)
        let t = Instant::now();
        let out = ask(addr, "");
        assert!(out.starts_with("HTTP/1.1 503"), "{out}");
        assert!(t.elapsed() < Duration::from_secs(2));
        drop(held);
    }
}

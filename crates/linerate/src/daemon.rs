//! Host mode: create the TUN, serve the UAPI socket, run the worker until a signal,
//! the TUN's removal, or the socket file's deletion ends it.

use crate::worker::{Exit, Outer, Request, Worker};
use crypto::KeyRegistry;
use dataplane::Arena;
use dataplane::wg::WgGraph;
use io::{TunDevice, UdpSocket, Waker};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Instant, SystemTime};

pub const SOCKET_DIR: &str = "/var/run/wireguard";
pub const DEFAULT_MTU: u32 = 1420;
/// Packet buffers per worker: 8 MiB of arena.
const ARENA_BUFFERS: usize = 4096;
/// Live transport keys the registry holds: six per peer (three keypairs).
const KEY_CAPACITY: usize = 6 * 65536;
/// Time per engine, algorithm and size class of the start-up calibration.
const CALIBRATION_TIME: std::time::Duration = std::time::Duration::from_millis(20);
/// Largest UAPI request accepted: a full `wg syncconf` of many peers fits easily.
const MAX_REQUEST: usize = 16 << 20;

pub fn socket_path(ifname: &str) -> PathBuf {
    Path::new(SOCKET_DIR).join(format!("{ifname}.sock"))
}

/// Everything host mode needs, made; `ready` is called once the interface and the
/// socket exist (the parent of a backgrounded daemon waits for it).
pub fn run(ifname: &str, engines: Option<&str>, ready: impl FnOnce()) -> Result<(), String> {
    // Offloads let one read bring a whole TCP burst; without them (old kernels, or
    // LINERATE_TUN_OFFLOAD=0) every packet is its own read.
    let offload = std::env::var("LINERATE_TUN_OFFLOAD").map_or(true, |v| v != "0");
    let tun = match offload.then(|| TunDevice::create_offload(ifname)) {
        Some(Ok(t)) => t,
        Some(Err(e)) => {
            eprintln!("linerate: TUN offloads unavailable ({e}); reading packet by packet");
            TunDevice::create(ifname).map_err(|e| format!("creating TUN {ifname}: {e}"))?
        }
        None => TunDevice::create(ifname).map_err(|e| format!("creating TUN {ifname}: {e}"))?,
    };
    let ifname = tun.name().to_string();
    // The reference implementations' default: a 1420-byte inner packet plus 80 bytes
    // of outer IPv6, UDP and WireGuard headers fills a 1500-byte underlay MTU.
    tun.set_mtu(DEFAULT_MTU)
        .map_err(|e| format!("setting the MTU of {ifname}: {e}"))?;
    let udp = UdpSocket::bind(0).map_err(|e| format!("binding the UDP socket: {e}"))?;
    let _ = udp.set_buffer_sizes(4 << 20, 4 << 20);
    let port = udp.local_port();

    let path = socket_path(&ifname);
    let listener = bind_socket(&path)?;
    let inode = std::fs::metadata(&path).map(|m| m.ino()).unwrap_or(0);

    let stop = Arc::new(AtomicBool::new(false));
    let waker = Arc::new(Waker::new().map_err(|e| format!("eventfd: {e}"))?);
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())
            .map_err(|e| format!("signal handler: {e}"))?;
    }
    // Wake the worker's poll on a signal: its sleep is short anyway, this makes exit prompt.
    let (req_tx, req_rx) = mpsc::channel::<Request>();

    let keys = Arc::new(KeyRegistry::new(KEY_CAPACITY));
    let (engines, choices) = crate::engines::configured_set(&keys, engines, CALIBRATION_TIME)?;
    for line in choices {
        eprintln!("linerate: engine for {line}");
    }
    let now = Instant::now();
    let mut device = wireguard::Device::new(keys, now, SystemTime::now());
    if let Some(t) = std::env::var("LINERATE_UNDER_LOAD_HANDSHAKES")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        device.set_under_load_threshold(t);
    }
    let wg = WgGraph::new(Arena::new(ARENA_BUFFERS), device, engines, now);
    let socket_path_check = path.clone();
    let socket_alive =
        Box::new(move || std::fs::metadata(&socket_path_check).is_ok_and(|m| m.ino() == inode));
    let mut worker = Worker::new(
        tun,
        Outer {
            udp,
            fwmark: 0,
            port,
        },
        wg,
        req_rx,
        waker.clone(),
        stop.clone(),
        socket_alive,
    );

    let uapi_waker = waker.clone();
    let uapi_stop = stop.clone();
    std::thread::Builder::new()
        .name("uapi".into())
        .spawn(move || serve_uapi(listener, req_tx, uapi_waker, uapi_stop))
        .map_err(|e| format!("starting the UAPI thread: {e}"))?;

    eprintln!(
        "linerate: {ifname} up, UAPI at {}, UDP port {port}",
        path.display()
    );
    ready();
    let exit = worker.run();
    stop.store(true, Ordering::Relaxed);
    let _ = std::fs::remove_file(&path);
    match exit {
        Exit::Signal => eprintln!("linerate: {ifname}: stopping on signal"),
        Exit::TunGone => eprintln!("linerate: {ifname}: interface removed, stopping"),
        Exit::SocketGone => eprintln!("linerate: {ifname}: UAPI socket deleted, stopping"),
        Exit::Fatal(e) => return Err(e),
    }
    Ok(())
}

fn bind_socket(path: &Path) -> Result<UnixListener, String> {
    std::fs::create_dir_all(SOCKET_DIR).map_err(|e| format!("creating {SOCKET_DIR}: {e}"))?;
    let _ = std::fs::set_permissions(SOCKET_DIR, std::fs::Permissions::from_mode(0o755));
    if path.exists() {
        if UnixStream::connect(path).is_ok() {
            return Err(format!(
                "{} is in use: is another instance running?",
                path.display()
            ));
        }
        std::fs::remove_file(path)
            .map_err(|e| format!("removing stale {}: {e}", path.display()))?;
    }
    let listener =
        UnixListener::bind(path).map_err(|e| format!("binding {}: {e}", path.display()))?;
    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
    Ok(listener)
}

/// Accepts UAPI connections, one request at a time, forwarding each to the worker.
fn serve_uapi(
    listener: UnixListener,
    to_worker: mpsc::Sender<Request>,
    waker: Arc<Waker>,
    stop: Arc<AtomicBool>,
) {
    for conn in listener.incoming() {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let Ok(conn) = conn else { continue };
        let _ = conn.set_read_timeout(Some(std::time::Duration::from_secs(5)));
        if handle_connection(conn, &to_worker, &waker).is_err() {
            continue;
        }
    }
}

fn handle_connection(
    conn: UnixStream,
    to_worker: &mpsc::Sender<Request>,
    waker: &Waker,
) -> std::io::Result<()> {
    let mut writer = conn.try_clone()?;
    let mut reader = BufReader::new(conn);
    loop {
        // A request is lines up to a blank line.
        let mut text = String::new();
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line)? == 0 {
                return Ok(()); // client done
            }
            if line == "\n" {
                break;
            }
            text.push_str(&line);
            if text.len() > MAX_REQUEST {
                writer.write_all(b"errno=22\n\n")?;
                return Ok(());
            }
        }
        let (reply_tx, reply_rx) = mpsc::sync_channel(1);
        if to_worker
            .send(Request {
                text,
                reply: reply_tx,
            })
            .is_err()
        {
            return Ok(());
        }
        let _ = waker.wake();
        let Ok(answer) = reply_rx.recv() else {
            return Ok(());
        };
        writer.write_all(answer.as_bytes())?;
    }
}

/// Sends one request to a running daemon's socket and returns the answer.
pub fn ask(ifname: &str, request: &str) -> Result<String, String> {
    let path = socket_path(ifname);
    let mut s = UnixStream::connect(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    s.write_all(request.as_bytes()).map_err(|e| e.to_string())?;
    s.write_all(b"\n").map_err(|e| e.to_string())?;
    let mut out = String::new();
    let mut r = BufReader::new(s);
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).map_err(|e| e.to_string())? == 0 || line == "\n" {
            return Ok(out);
        }
        out.push_str(&line);
    }
}

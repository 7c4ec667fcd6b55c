//! Host mode: create the TUN, serve the UAPI socket, run the worker until a signal,
//! the TUN's removal, or the socket file's deletion ends it.

use crate::host_follower;
use crate::host_path::HostPath;
use crate::worker::{Control, ControlRequest, Exit, Worker};
use crypto::KeyRegistry;
use dataplane::Arena;
use dataplane::wg::WgGraph;
use io::{TunDevice, UdpSocket, Waker};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Instant, SystemTime};

pub const SOCKET_DIR: &str = "/var/run/wireguard";
pub const DEFAULT_MTU: u32 = 1420;
/// Packet buffers per worker: 8 MiB of arena.
const ARENA_BUFFERS: usize = 4096;
/// Live transport keys the registry holds: six per peer (three keypairs).
const KEY_CAPACITY: usize = 6 * 65536;
/// Time per engine, algorithm and size class of the start-up calibration: five
/// classes, each engine's algorithms (the AEADs and AES-CBC with HMAC), about two
/// seconds in all.
const CALIBRATION_TIME: std::time::Duration = std::time::Duration::from_millis(12);
/// Largest UAPI request accepted: a `wg setconf` of 100,000 peers is about 10 MiB,
/// of 1,000,000 allowed IPs about 45 MiB; this leaves room for three times that.
const MAX_REQUEST: usize = 128 << 20;

pub fn socket_path(ifname: &str) -> PathBuf {
    Path::new(SOCKET_DIR).join(format!("{ifname}.sock"))
}

/// Everything host mode needs, made, for `workers` workers (one TUN queue and one
/// UDP socket on the shared port each; the first owns the device; with `spread`,
/// full frames spread over the workers); `ready` is called
/// once the interface and the socket exist (the parent of a backgrounded daemon waits
/// for it).
pub fn run(
    ifname: &str,
    engines: Option<&str>,
    workers: usize,
    spread: bool,
    ready: impl FnOnce(),
) -> Result<(), String> {
    let workers = workers.max(1);
    io::heap::keep_large_blocks_mapped();
    // Offloads let one read bring a whole TCP burst; without them (old kernels, or
    // LINERATE_TUN_OFFLOAD=0) every packet is its own read.
    let offload = std::env::var("LINERATE_TUN_OFFLOAD").map_or(true, |v| v != "0");
    let create = |offload| {
        TunDevice::create_queues(ifname, workers, offload)
            .map_err(|e| format!("creating TUN {ifname}: {e}"))
    };
    let mut tuns = match offload {
        true => create(true).or_else(|e| {
            eprintln!("linerate: TUN offloads unavailable ({e}); reading packet by packet");
            create(false)
        })?,
        false => create(false)?,
    };
    let ifname = tuns[0].name().to_string();
    // The reference implementations' default: a 1420-byte inner packet plus 80 bytes
    // of outer IPv6, UDP and WireGuard headers fills a 1500-byte underlay MTU.
    tuns[0]
        .set_mtu(DEFAULT_MTU)
        .map_err(|e| format!("setting the MTU of {ifname}: {e}"))?;
    let mut udps =
        UdpSocket::bind_group(0, workers).map_err(|e| format!("binding the UDP sockets: {e}"))?;
    for udp in &udps {
        let _ = udp.set_buffer_sizes(4 << 20, 4 << 20);
    }
    let port = udps[0].local_port();

    let path = socket_path(&ifname);
    let listener = bind_socket(&path)?;
    let inode = std::fs::metadata(&path).map(|m| m.ino()).unwrap_or(0);
    // From here on the socket file goes with us, whichever way this function ends.
    let _socket_file = SocketFile {
        path: path.clone(),
        inode,
    };

    let stop = Arc::new(AtomicBool::new(false));
    let waker = Arc::new(Waker::new().map_err(|e| format!("eventfd: {e}"))?);
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())
            .map_err(|e| format!("signal handler: {e}"))?;
    }
    // Wake the worker's poll on a signal: its sleep is short anyway, this makes exit prompt.
    let (req_tx, req_rx) = mpsc::channel::<ControlRequest>();

    let keys = Arc::new(KeyRegistry::new(KEY_CAPACITY));
    let (engines, choices) = crate::engines::configured_set(
        &keys,
        engines,
        CALIBRATION_TIME,
        &[crypto::Algorithm::ChaCha20Poly1305],
    )?;
    for line in choices {
        eprintln!("linerate: engine for {line}");
    }
    // One time base for every device of the process: an instant and the wall
    // clock read together.
    let (now, wall) = (Instant::now(), SystemTime::now());
    let mut device = wireguard::Device::new(keys.clone(), now, wall);
    if let Some(t) = std::env::var("LINERATE_UNDER_LOAD_HANDSHAKES")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        device.set_under_load_threshold(t);
    }
    device.publish();
    let cell = device.view_cell();
    let mut wg = WgGraph::new(Arena::new(ARENA_BUFFERS), device, engines, now);
    // Full frames spread over the workers (a tunnel's datagrams all reach one), if
    // asked: helpers poll without sleeping while they help, which pays where the
    // workers have cores to themselves and costs where they share them.
    let board = (workers > 1 && spread).then(|| crypto_async::spread::SpreadBoard::new(workers));
    let spreader = |i: usize, waker: &Arc<Waker>| {
        let waker = waker.clone();
        board.as_ref().map(|b| {
            b.spreader(i, move || {
                let _ = waker.wake();
            })
        })
    };
    if let Some(s) = spreader(0, &waker) {
        wg.context_mut().spread_over(s);
    }
    // The followers: each its own queue, socket, arena, engines and graph.
    let mut followers = Vec::with_capacity(workers - 1);
    for (i, (tun, udp)) in tuns.drain(1..).zip(udps.drain(1..)).enumerate() {
        let (mut link, inbox) = dataplane::wg_follow::link(cell.clone());
        let owner = waker.clone();
        link.set_nudge(move || {
            let _ = owner.wake();
        });
        wg.context_mut().lead_wg_follower(inbox);
        let own = wireguard::Device::new(keys.clone(), now, wall);
        let set = crate::engines::replica(&keys, wg.context().engines())?;
        let mut g = WgGraph::new(Arena::new(ARENA_BUFFERS), own, set, now);
        g.context_mut().follow_wg_device(link);
        let follower_waker = Arc::new(Waker::new().map_err(|e| format!("eventfd: {e}"))?);
        if let Some(s) = spreader(i + 1, &follower_waker) {
            g.context_mut().spread_over(s);
        }
        let path = HostPath::new(tun, udp, g);
        followers.push(host_follower::spawn(
            i + 1,
            path,
            follower_waker,
            stop.clone(),
            waker.clone(),
        )?);
    }
    let socket_path_check = path.clone();
    let socket_alive =
        Box::new(move || std::fs::metadata(&socket_path_check).is_ok_and(|m| m.ino() == inode));
    let own_path = HostPath::new(tuns.remove(0), udps.remove(0), wg);
    let mut worker = Worker::new(
        own_path,
        followers,
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
        "linerate: {ifname} up, UAPI at {}, UDP port {port}, {workers} worker(s)",
        path.display()
    );
    ready();
    let exit = worker.run();
    stop.store(true, Ordering::Relaxed);
    match exit {
        Exit::Signal => eprintln!("linerate: {ifname}: stopping on signal"),
        Exit::TunGone => eprintln!("linerate: {ifname}: interface removed, stopping"),
        Exit::SocketGone => eprintln!("linerate: {ifname}: UAPI socket deleted, stopping"),
        Exit::Fatal(e) => return Err(e),
    }
    Ok(())
}

/// The UAPI socket file we made; removed on drop unless another instance has since
/// put its own in its place.
pub struct SocketFile {
    path: PathBuf,
    inode: u64,
}

impl SocketFile {
    /// The socket file now at `path` (bound by us a moment ago).
    pub fn at(path: &Path) -> SocketFile {
        SocketFile {
            path: path.to_path_buf(),
            inode: std::fs::metadata(path).map(|m| m.ino()).unwrap_or(0),
        }
    }
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        if std::fs::metadata(&self.path).is_ok_and(|m| m.ino() == self.inode) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Binds a control socket at `path` (mode 0600), making its directory (0755) if
/// needed; refuses a path another running instance serves, replaces a stale one.
pub fn bind_socket(path: &Path) -> Result<UnixListener, String> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755));
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

/// Connections served at once; more wait in the listen backlog until one ends.
const MAX_CONNECTIONS: usize = 32;
/// How long a connection may sit between two lines of a request before it is closed,
/// so that a stuck client holds only its own slot, and not for long.
const IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Accepts UAPI connections and serves each on its own thread, as wireguard-go does,
/// so that an idle or slow client never delays another's request. The worker still
/// answers requests one at a time, in the order they arrive.
pub fn serve_uapi(
    listener: UnixListener,
    to_worker: mpsc::Sender<ControlRequest>,
    waker: Arc<Waker>,
    stop: Arc<AtomicBool>,
) {
    let open = Arc::new(AtomicUsize::new(0));
    for conn in listener.incoming() {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let Ok(conn) = conn else { continue };
        while open.load(Ordering::Acquire) >= MAX_CONNECTIONS {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let _ = conn.set_read_timeout(Some(IDLE_TIMEOUT));
        let (to_worker, waker, open) = (to_worker.clone(), waker.clone(), open.clone());
        open.fetch_add(1, Ordering::AcqRel);
        let spawned = std::thread::Builder::new().name("uapi-conn".into()).spawn({
            let open = open.clone();
            move || {
                let _ = handle_connection(conn, &to_worker, &waker);
                open.fetch_sub(1, Ordering::AcqRel);
            }
        });
        if spawned.is_err() {
            open.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// One request's text: its lines up to the blank line that ends it, or why it has
/// none: the client went away (`Ok(None)`), or the request is not something a worker
/// should see (`Err(errno)`: too long, or not UTF-8).
fn read_request(reader: &mut impl BufRead) -> std::io::Result<Option<Result<String, i32>>> {
    let mut bytes = Vec::new();
    loop {
        let start = bytes.len();
        if reader.read_until(b'\n', &mut bytes)? == 0 {
            return Ok(None); // client done (a partial request is dropped with it)
        }
        if &bytes[start..] == b"\n" {
            bytes.truncate(start);
            break;
        }
        if bytes.len() > MAX_REQUEST {
            return Ok(Some(Err(crate::uapi::EINVAL)));
        }
    }
    Ok(Some(
        String::from_utf8(bytes).map_err(|_| crate::uapi::EINVAL),
    ))
}

fn handle_connection(
    conn: UnixStream,
    to_worker: &mpsc::Sender<ControlRequest>,
    waker: &Waker,
) -> std::io::Result<()> {
    let mut writer = conn.try_clone()?;
    let mut reader = BufReader::new(conn);
    loop {
        let mut text = match read_request(&mut reader)? {
            None => return Ok(()),
            Some(Ok(text)) => text,
            Some(Err(e)) => {
                // The stream can no longer be trusted to be in step: answer and close.
                writer.write_all(crate::uapi::errno(e).as_bytes())?;
                return Ok(());
            }
        };
        // Parsed here, off the packet path: a malformed request never reaches it.
        let what = if text.starts_with("linerate-counters=1") {
            Control::Counters
        } else if let Some(what) = text.strip_prefix("linerate-show=") {
            Control::Show(what.trim().to_string())
        } else if let Some(req) = text.strip_prefix(crate::esp_control::PREFIX) {
            let parsed = crate::esp_control::parse(req);
            // The request may hold a key.
            zeroize::Zeroize::zeroize(&mut text);
            match parsed {
                Ok(r) => Control::Esp(r),
                Err(why) => {
                    writer.write_all(
                        format!("{why}\nerrno={}\n\n", crate::uapi::EINVAL).as_bytes(),
                    )?;
                    continue;
                }
            }
        } else {
            match crate::uapi::parse(&text) {
                Ok(request) => Control::Uapi(request),
                Err(e) => {
                    writer.write_all(crate::uapi::errno(e).as_bytes())?;
                    continue;
                }
            }
        };
        let is_set = matches!(what, Control::Uapi(crate::uapi::Request::Set(_)));
        let (reply_tx, reply_rx) = mpsc::sync_channel(1);
        if to_worker
            .send(ControlRequest {
                what,
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
        if is_set {
            // A set may have removed many peers: hand their memory back, here and
            // not on the worker.
            io::heap::give_back_free_memory();
        }
    }
}

/// Sends one request to a running daemon's socket and returns the answer.
pub fn ask(ifname: &str, request: &str) -> Result<String, String> {
    ask_at(&socket_path(ifname), request)
}

/// Sends one request to the control socket at `path` and returns the answer.
pub fn ask_at(path: &Path, request: &str) -> Result<String, String> {
    let mut s = UnixStream::connect(path).map_err(|e| format!("{}: {e}", path.display()))?;
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

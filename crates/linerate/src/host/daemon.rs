//! Host mode: create the TUN, serve the UAPI socket, run the worker until a signal,
//! the TUN's removal, or the socket file's deletion ends it.

use super::follower as host_follower;
use super::path::HostPath;
use super::worker::{Exit, Worker};
use crate::control::request::ControlRequest;
use crate::control::socket::{SocketFile, bind_socket, serve_uapi, socket_path};
use crate::service::Service;
use crypto::KeyRegistry;
use dataplane::Arena;
use dataplane::wg::WgGraph;
use io::{TunDevice, UdpSocket, Waker};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Instant, SystemTime};

pub const DEFAULT_MTU: u32 = 1420;
/// Packet buffers per worker: 40 MiB of arena, of which only what is in use is
/// backed by memory (about 14 MiB with every queue busy).
const ARENA_BUFFERS: usize = 4096;
/// Every buffer takes a jumbo packet: as wireguard-go, host mode carries whatever
/// MTU up to 9000 (and a little more) the interface is given after it starts
/// (wg-quick sets it then), which a standard buffer would refuse. The graph pays
/// 0 to 3% for the larger stride at 64 and 1,420 bytes (`linerate bench`).
const ARENA_BUFFER: usize = dataplane::JUMBO_BUFFER;
/// Live transport keys the registry holds: six per peer (three keypairs).
const KEY_CAPACITY: usize = 6 * 65536;
/// Time per engine, algorithm and size class of the start-up calibration: six
/// classes, each engine's algorithms (the AEADs and AES-CBC with HMAC); host mode
/// is up 0.45 s after it starts on a 2-core Zen 4.
const CALIBRATION_TIME: std::time::Duration = std::time::Duration::from_millis(12);
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
    // From here on the socket file goes with us, whichever way this function ends.
    let socket_file = SocketFile::at(&path);

    let stop = Arc::new(AtomicBool::new(false));
    let waker = Arc::new(Waker::new().map_err(|e| format!("eventfd: {e}"))?);
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())
            .map_err(|e| format!("signal handler: {e}"))?;
    }
    // Wake the worker's poll on a signal: its sleep is short anyway, this makes exit prompt.
    let (req_tx, req_rx) = mpsc::channel::<ControlRequest>();

    let keys = Arc::new(KeyRegistry::new(KEY_CAPACITY));
    let (engines, choices) = runtime::engines::configured_set(
        &keys,
        engines,
        CALIBRATION_TIME,
        &[crypto::Algorithm::ChaCha20Poly1305],
        ARENA_BUFFER,
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
    let mut wg = WgGraph::new(
        Arena::with_buffers(ARENA_BUFFERS, ARENA_BUFFER),
        device,
        engines,
        now,
    );
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
    let mut beats = Vec::with_capacity(workers);
    for (i, (tun, udp)) in tuns.drain(1..).zip(udps.drain(1..)).enumerate() {
        let (mut link, inbox) = dataplane::wg_follow::link(cell.clone());
        let owner = waker.clone();
        link.set_nudge(move || {
            let _ = owner.wake();
        });
        wg.context_mut().lead_wg_follower(inbox);
        let own = wireguard::Device::new(keys.clone(), now, wall);
        let set = runtime::engines::replica(&keys, wg.context().engines())?;
        let mut g = WgGraph::new(
            Arena::with_buffers(ARENA_BUFFERS, ARENA_BUFFER),
            own,
            set,
            now,
        );
        g.context_mut().follow_wg_device(link);
        let follower_waker = Arc::new(Waker::new().map_err(|e| format!("eventfd: {e}"))?);
        if let Some(s) = spreader(i + 1, &follower_waker) {
            g.context_mut().spread_over(s);
        }
        let path = HostPath::new(tun, udp, g);
        beats.push(path.heartbeat());
        followers.push(host_follower::spawn(
            i + 1,
            path,
            follower_waker,
            stop.clone(),
            waker.clone(),
        )?);
    }
    let socket_alive = Box::new(socket_file.still_there());
    let own_path = HostPath::new(tuns.remove(0), udps.remove(0), wg);
    beats.insert(0, own_path.heartbeat());
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

    let up = format!(
        "{ifname} up, UAPI at {}, UDP port {port}, {workers} worker(s)",
        path.display()
    );
    eprintln!("linerate: {up}");
    ready();
    let service = Service::from_env();
    service.ready(&up);
    service.watch(beats, stop.clone());
    let exit = worker.run();
    stop.store(true, Ordering::Relaxed);
    service.stopping();
    match exit {
        Exit::Signal => eprintln!("linerate: {ifname}: stopping on signal"),
        Exit::TunGone => eprintln!("linerate: {ifname}: interface removed, stopping"),
        Exit::SocketGone => eprintln!("linerate: {ifname}: UAPI socket deleted, stopping"),
        Exit::Fatal(e) => return Err(e),
    }
    Ok(())
}

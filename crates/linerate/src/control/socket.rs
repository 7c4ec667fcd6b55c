//! The control socket every mode serves: bound at mode 0600 (a stale file
//! replaced, a live one refused), each connection on its own thread with an idle
//! timeout, each request read whole and parsed off the packet path, then handed to
//! the worker that owns the state it asks about and answered in the order it came.
//! The client side is `client`.

use super::request::{Control, ControlRequest};
use super::{esp_request, uapi};
use io::Waker;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;

/// Where a gateway's control socket is when its file names none.
pub const DEFAULT_CONTROL: &str = "/run/linerate/gateway.sock";

/// Where a WireGuard interface's UAPI socket is, as wireguard-go puts it (and `wg`
/// looks for it).
pub const SOCKET_DIR: &str = "/var/run/wireguard";
/// Largest UAPI request accepted: a `wg setconf` of 100,000 peers is about 10 MiB,
/// of 1,000,000 allowed IPs about 45 MiB; this leaves room for three times that.
const MAX_REQUEST: usize = 128 << 20;

/// The UAPI socket of interface `ifname`.
pub fn socket_path(ifname: &str) -> PathBuf {
    Path::new(SOCKET_DIR).join(format!("{ifname}.sock"))
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

    /// A check that the file is still ours (not deleted, not replaced by another
    /// instance's), for a thread other than the one holding this.
    pub fn still_there(&self) -> impl Fn() -> bool + Send + 'static {
        let (path, inode) = (self.path.clone(), self.inode);
        move || std::fs::metadata(&path).is_ok_and(|m| m.ino() == inode)
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
            return Ok(Some(Err(uapi::EINVAL)));
        }
    }
    Ok(Some(String::from_utf8(bytes).map_err(|_| uapi::EINVAL)))
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
                writer.write_all(uapi::errno(e).as_bytes())?;
                return Ok(());
            }
        };
        // Parsed here, off the packet path: a malformed request never reaches it.
        let what = if text.starts_with("linerate-counters=1") {
            Control::Counters
        } else if let Some(what) = text.strip_prefix("linerate-show=") {
            Control::Show(what.trim().to_string())
        } else if let Some(req) = text.strip_prefix(esp_request::PREFIX) {
            let parsed = esp_request::parse(req);
            // The request may hold a key.
            zeroize::Zeroize::zeroize(&mut text);
            match parsed {
                Ok(r) => Control::Esp(r),
                Err(why) => {
                    writer.write_all(format!("{why}\nerrno={}\n\n", uapi::EINVAL).as_bytes())?;
                    continue;
                }
            }
        } else {
            match uapi::parse(&text) {
                Ok(request) => Control::Uapi(request),
                Err(e) => {
                    writer.write_all(uapi::errno(e).as_bytes())?;
                    continue;
                }
            }
        };
        let is_set = matches!(what, Control::Uapi(uapi::Request::Set(_)));
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

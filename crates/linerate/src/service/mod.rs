//! What the daemons tell the service manager that started them (systemd's
//! notification protocol, `io::service_notify`): ready once the ports pass
//! traffic, reloading and ready again around a SIGHUP reload, stopping, and the
//! watchdog's pings while every worker's loop turns (`watchdog`). Outside a
//! service manager (no `NOTIFY_SOCKET`) each of these does nothing.

mod watchdog;

pub use watchdog::Heartbeat;

use io::service_notify::{self, Notifier};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// The service manager's socket, if there is one.
#[derive(Clone, Debug, Default)]
pub struct Service {
    notifier: Option<Arc<Notifier>>,
    /// Whether the daemon has said it is ready: a reload before that (a SIGHUP
    /// during the start) says nothing, so the first READY=1 still means ready.
    ready: Arc<AtomicBool>,
}

impl Service {
    /// The socket `NOTIFY_SOCKET` names. One that cannot be used is said on
    /// stderr and left alone: the daemon runs, and the service manager, which
    /// hears nothing, says the start timed out.
    pub fn from_env() -> Service {
        let notifier = match Notifier::from_env() {
            Ok(n) => n.map(Arc::new),
            Err(e) => {
                eprintln!(
                    "linerate: warning: NOTIFY_SOCKET: {e}; the service manager is not told when the daemon is ready"
                );
                None
            }
        };
        Service {
            notifier,
            ready: Arc::default(),
        }
    }

    fn send(&self, what: &str, f: impl FnOnce(&Notifier) -> std::io::Result<()>) {
        if let Some(n) = &self.notifier
            && let Err(e) = f(n)
        {
            eprintln!("linerate: warning: telling the service manager {what}: {e}");
        }
    }

    /// Ready, and how it runs (`systemctl status` shows `status`).
    pub fn ready(&self, status: &str) {
        self.ready.store(true, Ordering::Relaxed);
        self.send("ready", |n| n.ready(status));
    }

    /// Reloading its configuration, once ready (ready again at
    /// [`reloaded`](Service::reloaded)).
    pub fn reloading(&self) {
        if self.ready.load(Ordering::Relaxed) {
            self.send("reloading", Notifier::reloading);
        }
    }

    /// Done reloading, whatever came of it (`status`), once ready.
    pub fn reloaded(&self, status: &str) {
        if self.ready.load(Ordering::Relaxed) {
            self.send("ready", |n| n.ready(status));
        }
    }

    /// Stopping.
    pub fn stopping(&self) {
        self.send("stopping", Notifier::stopping);
    }

    /// Starts the watchdog over the workers' heartbeats where the service
    /// manager asks for one (`WatchdogSec=`, as `WATCHDOG_USEC`); says on stderr
    /// how often it pings. A watchdog that cannot start is said: the service
    /// manager, which then hears no ping, restarts the daemon.
    pub fn watch(&self, beats: Vec<Heartbeat>, stop: Arc<AtomicBool>) {
        let (Some(n), Some(interval)) = (&self.notifier, service_notify::watchdog_interval())
        else {
            return;
        };
        eprintln!(
            "linerate: watchdog: pinging the service manager every {} ms while all {} worker loops turn",
            (interval / 2).as_millis(),
            beats.len()
        );
        if let Err(e) = watchdog::spawn(n.clone(), interval, beats, stop) {
            eprintln!("linerate: warning: {e}");
        }
    }
}

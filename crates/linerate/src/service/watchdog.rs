//! The service manager's watchdog, fed from the workers' loops: each worker
//! bumps its heartbeat once a turn (a gateway's loop turns at least every 10
//! ms, a host mode worker's every half second), and a thread pings the service
//! manager (`WATCHDOG=1`) every half `WatchdogSec` while every heartbeat has
//! moved since its last look. A worker stuck in a loop or a system call stops
//! the pings, and the service manager restarts the daemon: a data path that
//! stalled is not left running with its ports held.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// One worker's heartbeat: turns of its loop so far.
#[derive(Clone, Debug, Default)]
pub struct Heartbeat(Arc<AtomicU64>);

impl Heartbeat {
    /// A turn of the worker's loop.
    pub fn beat(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    fn read(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// The first worker whose heartbeat has not moved since `seen` (which is
/// brought up to date), if any.
fn stalled(beats: &[Heartbeat], seen: &mut [u64]) -> Option<usize> {
    let mut first = None;
    for (i, (b, s)) in beats.iter().zip(seen.iter_mut()).enumerate() {
        let now = b.read();
        if now == *s && first.is_none() {
            first = Some(i);
        }
        *s = now;
    }
    first
}

/// Starts the thread that pings `notifier` every half `interval` while every
/// worker's heartbeat moves, until `stop`. A worker that stalls is named once
/// on stderr, and the pings stop until it moves again.
pub fn spawn(
    notifier: Arc<io::service_notify::Notifier>,
    interval: Duration,
    beats: Vec<Heartbeat>,
    stop: Arc<AtomicBool>,
) -> Result<(), String> {
    let period = interval / 2;
    std::thread::Builder::new()
        .name("watchdog".into())
        .spawn(move || {
            let mut seen = vec![u64::MAX; beats.len()];
            let mut said = false;
            while !stop.load(Ordering::Relaxed) {
                match stalled(&beats, &mut seen) {
                    None => {
                        let _ = notifier.watchdog();
                        if said {
                            eprintln!("linerate: watchdog: every worker turns again; pings resume");
                        }
                        said = false;
                    }
                    Some(w) if !said => {
                        eprintln!(
                            "linerate: watchdog: worker {w} has not turned its loop for {} ms: no ping to the service manager, which restarts the daemon after its WatchdogSec",
                            period.as_millis()
                        );
                        said = true;
                    }
                    Some(_) => {}
                }
                // Woken once a period only: the process's exit ends the thread
                // wherever it sleeps.
                std::thread::sleep(period);
            }
        })
        .map(drop)
        .map_err(|e| format!("starting the watchdog thread: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_that_does_not_turn_is_named() {
        let beats = vec![Heartbeat::default(), Heartbeat::default()];
        let mut seen = vec![u64::MAX; 2];
        assert_eq!(
            stalled(&beats, &mut seen),
            None,
            "the first look sees them move"
        );
        beats[0].beat();
        beats[1].beat();
        assert_eq!(stalled(&beats, &mut seen), None);
        beats[0].beat();
        assert_eq!(stalled(&beats, &mut seen), Some(1), "worker 1 did not turn");
        assert_eq!(stalled(&beats, &mut seen), Some(0), "now neither did 0");
        beats[0].beat();
        beats[1].beat();
        assert_eq!(stalled(&beats, &mut seen), None, "both turn again");
    }

    /// Pings come while the workers turn and stop when one does not.
    #[test]
    fn pings_follow_the_heartbeats() {
        let dir = std::env::temp_dir().join(format!("lr-watchdog-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("notify.sock");
        let _ = std::fs::remove_file(&path);
        let listener = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
        listener
            .set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let notifier = Arc::new(io::service_notify::Notifier::to(path.as_os_str()).unwrap());
        let beat = Heartbeat::default();
        let stop = Arc::new(AtomicBool::new(false));
        let turning = Arc::new(AtomicBool::new(true));
        let worker = {
            let (beat, stop, turning) = (beat.clone(), stop.clone(), turning.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if turning.load(Ordering::Relaxed) {
                        beat.beat();
                    }
                    std::thread::sleep(Duration::from_millis(2));
                }
            })
        };
        spawn(
            notifier,
            Duration::from_millis(100),
            vec![beat],
            stop.clone(),
        )
        .unwrap();
        let mut buf = [0u8; 32];
        for _ in 0..3 {
            let n = listener
                .recv(&mut buf)
                .expect("a ping while the worker turns");
            assert_eq!(&buf[..n], b"WATCHDOG=1");
        }
        turning.store(false, Ordering::Relaxed);
        // The pings of looks that still saw the last turns, then none.
        std::thread::sleep(Duration::from_millis(200));
        listener.set_nonblocking(true).unwrap();
        while listener.recv(&mut buf).is_ok() {}
        listener.set_nonblocking(false).unwrap();
        assert!(
            listener.recv(&mut buf).is_err(),
            "no ping while the worker stalls"
        );
        stop.store(true, Ordering::Relaxed);
        worker.join().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}

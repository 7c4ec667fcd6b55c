//! The owner's thread of host mode: its own data path (a TUN queue, a UDP socket and
//! the graph that holds the WireGuard device), the device's timers and control, and
//! the followers (the other workers, one tunnel on every core: `follower`).
//! Control requests, parsed by the UAPI threads, arrive over a channel with an eventfd
//! wake-up and are carried out between batches of packets, a bounded step at a time;
//! what they change for every worker goes to the followers over their channels.

use super::follower::{FollowerControl, FollowerHandle};
use super::path::HostPath;
use crate::control::counter_report::CounterReport;
use crate::control::request::{Control, ControlRequest};
use crate::control::uapi::{self, EADDRINUSE, EIO, Job, SocketSettings};
use io::{Interest, PollFd, UdpSocket, Waker};
use std::collections::VecDeque;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};
use std::time::{Duration, Instant};

/// Longest sleep: the loop also checks that the TUN and the UAPI socket still exist.
const MAX_SLEEP: Duration = Duration::from_millis(500);

/// Longest time one step of a control request may hold the packets back.
const CONTROL_STEP: Duration = Duration::from_micros(300);

/// The outer sockets and their settings, as the UAPI sees them: the owner's socket
/// and, through the followers' handles, theirs (one port, one mark for all).
pub struct Outer<'a> {
    pub udp: &'a mut UdpSocket,
    pub fwmark: &'a mut u32,
    pub followers: &'a mut [FollowerHandle],
}

impl SocketSettings for Outer<'_> {
    fn listen_port(&self) -> u16 {
        self.udp.local_port()
    }

    fn set_listen_port(&mut self, port: u16) -> Result<(), i32> {
        if port == self.udp.local_port() && port != 0 {
            return Ok(());
        }
        let errno = |e: std::io::Error| e.raw_os_error().unwrap_or(EADDRINUSE);
        let mut group = UdpSocket::bind_group(port, 1 + self.followers.len()).map_err(errno)?;
        for udp in &group {
            if *self.fwmark != 0 {
                udp.set_fwmark(*self.fwmark)
                    .map_err(|e| e.raw_os_error().unwrap_or(EIO))?;
            }
            let _ = udp.set_buffer_sizes(4 << 20, 4 << 20);
        }
        // Every socket is made before any is handed out: a failure changes nothing.
        let mut handles = Vec::with_capacity(self.followers.len());
        for udp in &group[1..] {
            handles.push(udp.duplicate().map_err(errno)?);
        }
        for ((f, udp), handle) in self.followers.iter_mut().zip(group.drain(1..)).zip(handles) {
            f.udp = handle;
            f.send(FollowerControl::Socket(udp));
        }
        *self.udp = group.pop().expect("the owner's socket");
        Ok(())
    }

    fn fwmark(&self) -> u32 {
        *self.fwmark
    }

    fn set_fwmark(&mut self, mark: u32) -> Result<(), i32> {
        let errno = |e: std::io::Error| e.raw_os_error().unwrap_or(EIO);
        self.udp.set_fwmark(mark).map_err(errno)?;
        for f in self.followers.iter() {
            f.udp.set_fwmark(mark).map_err(errno)?;
        }
        *self.fwmark = mark;
        Ok(())
    }
}

/// Why the loop ended.
#[derive(Debug)]
pub enum Exit {
    Signal,
    TunGone,
    SocketGone,
    Fatal(String),
}

pub struct Worker {
    pub path: HostPath,
    pub fwmark: u32,
    /// The other workers, on the same device.
    pub followers: Vec<FollowerHandle>,
    pub requests: Receiver<ControlRequest>,
    /// UAPI requests being carried out, oldest first, each with where its reply goes.
    jobs: VecDeque<(Job, SyncSender<String>)>,
    pub waker: Arc<Waker>,
    pub stop: Arc<AtomicBool>,
    /// Checked every loop: false once the UAPI socket file is gone.
    pub socket_alive: Box<dyn Fn() -> bool + Send>,
    /// Times the interface MTU was set above what the data path carries and set back.
    mtu_refused: u64,
    /// The MTU the workers were last given.
    mtu: usize,
}

impl Worker {
    pub fn new(
        path: HostPath,
        followers: Vec<FollowerHandle>,
        requests: Receiver<ControlRequest>,
        waker: Arc<Waker>,
        stop: Arc<AtomicBool>,
        socket_alive: Box<dyn Fn() -> bool + Send>,
    ) -> Worker {
        Worker {
            path,
            fwmark: 0,
            followers,
            requests,
            jobs: VecDeque::new(),
            waker,
            stop,
            socket_alive,
            mtu_refused: 0,
            mtu: 0,
        }
    }

    /// Runs the owner's loop, then stops the followers and waits for them.
    pub fn run(&mut self) -> Exit {
        let exit = self.run_loop();
        self.stop.store(true, Ordering::Relaxed);
        for f in &mut self.followers {
            f.join();
        }
        exit
    }

    fn run_loop(&mut self) -> Exit {
        let mut last_check = Instant::now();
        self.check_mtu();
        loop {
            if self.stop.load(Ordering::Relaxed) {
                return Exit::Signal;
            }
            let now = Instant::now();
            let sleep = if self.jobs.is_empty() {
                self.path.wg.context().wg_timers_due_in(now, MAX_SLEEP)
            } else {
                Duration::ZERO // a request is half done: look at packets, then go on
            };
            let sleep = self.path.wg.context_mut().helper_sleep(sleep);
            let mut fds = [
                PollFd::new(self.path.tun.device.as_raw_fd(), Interest::READABLE),
                PollFd::new(self.path.udp.socket.as_raw_fd(), Interest::READABLE),
                PollFd::new(self.waker.as_raw_fd(), Interest::READABLE),
            ];
            if let Err(e) = io::poll(&mut fds, Some(sleep)) {
                return Exit::Fatal(format!("poll: {e}"));
            }
            if fds[1].readable() {
                self.path.read_udp();
            }
            if (fds[0].readable() || fds[0].error())
                && let Err(e) = self.path.read_tun()
            {
                if io::is_gone(&e) {
                    return Exit::TunGone;
                }
                return Exit::Fatal(format!("reading the TUN: {e}"));
            }
            if fds[2].readable() {
                self.waker.drain();
                // (A follower's nudge wakes the loop too: its report is taken in
                // below, with the graph's run.)
                let requests: Vec<ControlRequest> = self.requests.try_iter().collect();
                if !requests.is_empty() {
                    self.take_in_reports();
                }
                for req in requests {
                    match req.what {
                        Control::Counters => {
                            let _ = req
                                .reply
                                .send(self.counter_report().to_text() + "errno=0\n\n");
                        }
                        Control::Show(_) | Control::Esp(_) => {
                            let _ = req.reply.send(uapi::errno(uapi::EINVAL));
                        }
                        Control::Uapi(r) => {
                            let job = Job::new(r, self.path.wg.context().wg_device());
                            self.jobs.push_back((job, req.reply));
                        }
                    }
                }
            }
            self.control_step();
            let now = Instant::now();
            self.path.wg.tick(now);
            self.path.run(now);
            self.path.wg.context_mut().help_others();
            if now.saturating_duration_since(last_check) >= MAX_SLEEP {
                last_check = now;
                if !self.path.tun.device.still_exists() {
                    return Exit::TunGone;
                }
                self.check_mtu();
                if !(self.socket_alive)() {
                    return Exit::SocketGone;
                }
            }
        }
    }

    /// Takes in every follower's report of its traffic so far, so that an answer to
    /// a request counts it: what waits in the inbox, then what each follower still
    /// holds (when the inbox had no room for it).
    fn take_in_reports(&mut self) {
        self.path.run(Instant::now());
        if self.followers.is_empty() {
            return;
        }
        for f in &self.followers {
            if !f.report() {
                eprintln!("linerate: a worker did not send its report in time");
            }
        }
        self.path.run(Instant::now());
    }

    /// Follows the interface MTU, which bounds the padding, and refuses one larger than
    /// the data path's buffers carry: the MTU is set back to the largest it carries, so
    /// the kernel fragments larger packets before they reach us instead of our dropping
    /// them, and the refusal is logged and counted.
    fn check_mtu(&mut self) {
        let Ok(mtu) = self.path.tun.device.mtu() else {
            return; // the interface is going; the loop notices
        };
        let mut mtu = mtu as usize;
        let max = self.path.wg.max_mtu();
        if mtu > max {
            self.mtu_refused += 1;
            match self.path.tun.device.set_mtu(max as u32) {
                Ok(()) => {
                    eprintln!(
                        "linerate: {}: MTU {mtu} refused: this data path carries inner packets of at most {max} bytes ({}-byte buffers); MTU set back to {max}",
                        self.path.tun.device.name(),
                        self.path.wg.context().arena().buffer_size()
                    );
                    mtu = max;
                }
                Err(e) => eprintln!(
                    "linerate: {}: MTU {mtu} is more than this data path carries ({max} bytes), and setting it back failed: {e}; packets over {max} bytes are dropped and counted as tun.too_big",
                    self.path.tun.device.name()
                ),
            }
        }
        if mtu != self.mtu {
            self.mtu = mtu;
            self.path.wg.set_mtu(mtu);
            for f in &self.followers {
                f.send(FollowerControl::Mtu(mtu));
            }
        }
    }

    /// One bounded step of the oldest control request; its reply goes out when done.
    fn control_step(&mut self) {
        let Some((job, _)) = self.jobs.front_mut() else {
            return;
        };
        let now = Instant::now();
        let mut outer = Outer {
            udp: &mut self.path.udp.socket,
            fwmark: &mut self.fwmark,
            followers: &mut self.followers,
        };
        let done = job.step(
            self.path.wg.context_mut().wg_device_mut(),
            &mut outer,
            now,
            now + CONTROL_STEP,
        );
        if let Some(reply) = done
            && let Some((_, to)) = self.jobs.pop_front()
        {
            let _ = to.send(reply);
        }
        // A set may have asked for handshakes or keepalives.
        self.path.run(now);
    }

    /// Everything the interface counts, for `linerate show counters`: every
    /// worker's counters added up.
    pub fn counter_report(&self) -> CounterReport {
        let mut r = self.path.counter_report();
        for f in &self.followers {
            match f.counters() {
                Some(c) => r.add(&c),
                None => r.add_other("workers.unanswered", 1),
            }
        }
        r.add_other("tun.mtu_refused", self.mtu_refused);
        r
    }
}

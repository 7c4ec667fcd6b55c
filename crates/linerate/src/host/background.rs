//! Going to the background as wireguard-go does: the parent starts a copy of itself in
//! the foreground in a new session and waits until the child says it is ready, or why
//! it is not, so that wg-quick can go on at once and a failure is reported where the
//! operator typed the command.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

/// Set in the child: it reports on stdout, one line, `ready` or `failed: REASON`.
const NOTIFY_ENV: &str = "LINERATE_NOTIFY_READY";

/// Whether this process is a backgrounded child that reports to its parent.
pub fn is_child() -> bool {
    std::env::var_os(NOTIFY_ENV).is_some()
}

/// Tells the waiting parent (if any) that the daemon is up.
pub fn report_ready() {
    if is_child() {
        println!("ready");
    }
}

/// Tells the waiting parent (if any) why the daemon did not start.
pub fn report_failure(reason: &str) {
    if is_child() {
        println!("failed: {}", reason.replace('\n', "; "));
    }
}

/// Starts `--foreground IFNAME --workers N [--spread] [--engine SPEC]` as a child
/// and returns once it is ready; an error says why it is not, in the child's own
/// words when it gave any.
pub fn start(
    ifname: &str,
    engines: Option<&str>,
    workers: usize,
    spread: bool,
) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| format!("finding my own executable: {e}"))?;
    let log = std::env::var("LINERATE_LOG_FILE").ok();
    let stderr = match &log {
        Some(path) => Stdio::from(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| format!("opening {path}: {e}"))?,
        ),
        None => Stdio::null(),
    };
    let mut cmd = Command::new(exe);
    cmd.args(["--foreground", ifname, "--workers", &workers.to_string()]);
    if spread {
        cmd.arg("--spread");
    }
    if let Some(spec) = engines {
        cmd.args(["--engine", spec]);
    }
    let mut child = cmd
        .env(NOTIFY_ENV, "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .process_group(0)
        .spawn()
        .map_err(|e| format!("starting the daemon: {e}"))?;
    let mut line = String::new();
    if let Some(stdout) = child.stdout.take() {
        let _ = BufReader::new(stdout).read_line(&mut line);
    }
    let line = line.trim();
    if line == "ready" {
        return Ok(());
    }
    let status = child
        .wait()
        .map(|s| s.to_string())
        .unwrap_or_else(|e| e.to_string());
    match line.strip_prefix("failed: ") {
        Some(reason) => Err(reason.to_string()),
        None => Err(format!(
            "the daemon did not start ({status}) and said nothing; {}",
            match &log {
                Some(path) => format!("see {path}"),
                None => "run with --foreground to see its log".into(),
            }
        )),
    }
}

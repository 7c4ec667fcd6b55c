//! The client side of the control socket: one request sent and its answer read,
//! for `linerate show` and `linerate esp`.

use super::esp_request::PREFIX;
use super::options::{EspAction, EspSide};
use super::socket::socket_path;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use zeroize::Zeroizing;

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

impl EspSide {
    /// The start of an `esp` request to the gateway: `verb`, the tunnel and the
    /// direction.
    fn request(&self, verb: &str) -> String {
        format!(
            "{PREFIX}{verb}\ntunnel={}\ndirection={}\n",
            self.tunnel, self.direction
        )
    }
}

/// `linerate esp add|remove`: the request to the gateway's socket, and its answer
/// printed.
pub fn send_esp(action: &EspAction) -> Result<(), String> {
    let (socket, text) = match action {
        EspAction::Add(a) => {
            let keymat = crate::keyfile::read_hex_key_file(&a.key_file, None)?;
            let mut t = Zeroizing::new(format!(
                "{}spi={}\nalgorithm={}\nkey={}\nesn={}\n",
                a.side.request("add"),
                a.spi,
                a.algorithm,
                hex::encode(&*keymat),
                a.esn
            ));
            for (k, v) in [
                ("replay_window", a.replay_window.map(u64::from)),
                ("lifetime_bytes", a.lifetime_bytes),
                ("lifetime_packets", a.lifetime_packets),
            ] {
                if let Some(v) = v {
                    t.push_str(&format!("{k}={v}\n"));
                }
            }
            (&a.gateway.socket, t)
        }
        EspAction::Remove(r) => {
            let mut t = r.side.request("remove");
            if let Some(spi) = &r.spi {
                t.push_str(&format!("spi={spi}\n"));
            }
            (&r.gateway.socket, Zeroizing::new(t))
        }
    };
    let answer = ask_at(socket, &text)?;
    match answer.rsplit_once("errno=") {
        Some((body, errno)) if errno.trim() == "0" => {
            print!("{body}");
            Ok(())
        }
        Some((body, _)) => Err(format!("{}: {}", socket.display(), body.trim())),
        None => Err(format!("{}: no answer", socket.display())),
    }
}

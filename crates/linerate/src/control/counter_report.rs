//! What a running interface counts, as data: one row per graph node (calls, packets,
//! clocks, consumed, drops by the node's own reason names) and the drivers' counters.
//! The worker fills it from the graph; it travels over the control socket as
//! `name=value` lines (the UAPI's format, which scripts read too) and is parsed back
//! into the same structure by `linerate show counters`. Writing and reading live here
//! together, so the two cannot drift apart.

use std::fmt::Write as _;

/// One node's counters. Drops list every reason the node declares, zero or not.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeRow {
    pub name: String,
    pub calls: u64,
    pub packets: u64,
    pub clocks: u64,
    pub consumed: u64,
    pub drops: Vec<(String, u64)>,
}

impl NodeRow {
    pub fn dropped(&self) -> u64 {
        self.drops.iter().map(|(_, n)| n).sum()
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CounterReport {
    pub nodes: Vec<NodeRow>,
    /// Counters outside the graph, by full name (`tun.too_big`, `udp.send_failed`, ...).
    pub other: Vec<(String, u64)>,
}

const NODE_FIELDS: [&str; 4] = ["calls", "packets", "clocks", "consumed"];

impl CounterReport {
    pub fn from_graph<'a>(
        nodes: impl Iterator<Item = (&'static str, &'a dataplane::NodeCounters)>,
    ) -> CounterReport {
        let nodes = nodes
            .map(|(name, c)| NodeRow {
                name: name.to_string(),
                calls: c.calls,
                packets: c.packets,
                clocks: c.clocks,
                consumed: c.consumed,
                drops: c.drops().map(|(e, n)| (e.name.to_string(), n)).collect(),
            })
            .collect();
        CounterReport {
            nodes,
            other: Vec::new(),
        }
    }

    /// Adds another worker's counters: nodes and reasons by name, others by name.
    pub fn add(&mut self, other: &CounterReport) {
        for n in &other.nodes {
            let row = self.row(&n.name);
            row.calls += n.calls;
            row.packets += n.packets;
            row.clocks += n.clocks;
            row.consumed += n.consumed;
            for (reason, v) in &n.drops {
                match row.drops.iter_mut().find(|(r, _)| r == reason) {
                    Some((_, total)) => *total += v,
                    None => row.drops.push((reason.clone(), *v)),
                }
            }
        }
        for (name, v) in &other.other {
            match self.other.iter_mut().find(|(n, _)| n == name) {
                Some((_, total)) => *total += v,
                None => self.other.push((name.clone(), *v)),
            }
        }
    }

    /// Drops counted outside the graph (a port's driver), listed as the node `name`
    /// with those reasons and nothing else.
    pub fn add_drops(&mut self, name: &str, drops: &[(&'static str, u64)]) {
        let row = self.row(name);
        for &(reason, v) in drops {
            match row.drops.iter_mut().find(|(r, _)| r == reason) {
                Some((_, total)) => *total += v,
                None => row.drops.push((reason.to_string(), v)),
            }
        }
    }

    pub fn add_other(&mut self, name: &str, value: u64) {
        self.other.push((name.to_string(), value));
    }

    /// What happened to frames handed to asynchronous engines, as `async.*`.
    pub fn add_inflight(&mut self, c: dataplane::inflight::InFlightCounters) {
        for (name, value) in [
            ("async.out_of_order", c.out_of_order),
            ("async.unknown", c.unknown),
            ("async.wrong_length", c.wrong_length),
            ("async.lost", c.lost),
        ] {
            self.add_other(name, value);
        }
    }

    /// What the late check of the WireGuard packets a worker sealed did: packets
    /// sealed again as `wg.resealed`, those it had to drop as its drops.
    pub fn add_late(&mut self, c: dataplane::seal_ledger::LateCounters) {
        self.add_other("wg.resealed", c.resealed);
        self.add_drops(
            dataplane::seal_ledger::NAME,
            &[(dataplane::seal_ledger::ERRORS[0].name, c.dropped)],
        );
    }

    /// What the ESP handoff of a worker did: packets it handed to an SA's sending
    /// worker and took in from others (`esp_handoff.*`), and its drops.
    pub fn add_handoff(&mut self, c: Option<dataplane::esp_handoff::HandoffCounters>) {
        let Some(c) = c else { return };
        self.add_other("esp_handoff.handed", c.handed);
        self.add_other("esp_handoff.taken", c.taken);
        let reasons = dataplane::esp_handoff::ERRORS;
        self.add_drops(
            dataplane::esp_handoff::NAME,
            &[(reasons[0].name, c.full), (reasons[1].name, c.no_buffer)],
        );
    }

    /// What spreading frames over the workers did on one worker (`spread.*`):
    /// frames it cut into pieces, its pieces other workers ran, pieces it took back
    /// because nobody had taken them, pieces it ran for others, and its asks to an
    /// idle worker to linger.
    pub fn add_spread(&mut self, c: Option<crypto_async::spread::SpreadCounters>) {
        let Some(c) = c else { return };
        for (name, value) in [
            ("spread.frames", c.spread),
            ("spread.pieces_helped", c.pieces_helped),
            ("spread.pieces_taken_back", c.pieces_taken_back),
            ("spread.pieces_run_for_others", c.pieces_run_for_others),
            ("spread.asks", c.asks),
        ] {
            self.add_other(name, value);
        }
    }

    /// The `name=value` lines, without the UAPI's closing `errno` line. Drops that
    /// are zero are left out, so the answer stays short.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for n in &self.nodes {
            let values = [n.calls, n.packets, n.clocks, n.consumed];
            for (field, v) in NODE_FIELDS.iter().zip(values) {
                let _ = writeln!(out, "{}.{field}={v}", n.name);
            }
            for (reason, v) in n.drops.iter().filter(|(_, v)| *v > 0) {
                let _ = writeln!(out, "{}.drop.{reason}={v}", n.name);
            }
        }
        for (name, v) in &self.other {
            let _ = writeln!(out, "{name}={v}");
        }
        out
    }

    /// Reads what [`CounterReport::to_text`] wrote (and the `errno` line the socket
    /// adds). A name that is a node's field starts or continues that node's row;
    /// anything else is an other counter. A line that is not `name=number` is refused.
    pub fn parse(text: &str) -> Result<CounterReport, String> {
        let mut report = CounterReport::default();
        for line in text.lines().filter(|l| !l.is_empty()) {
            let (key, value) = line
                .split_once('=')
                .ok_or_else(|| format!("not a counter line: {line:?}"))?;
            let value: i64 = value
                .parse()
                .map_err(|_| format!("not a number in {line:?}"))?;
            if key == "errno" {
                if value != 0 {
                    return Err(format!("the interface answered errno={value}"));
                }
                continue;
            }
            let value = u64::try_from(value).map_err(|_| format!("negative in {line:?}"))?;
            match key.split_once('.') {
                Some((node, field)) if NODE_FIELDS.contains(&field) => {
                    let row = report.row(node);
                    match field {
                        "calls" => row.calls = value,
                        "packets" => row.packets = value,
                        "clocks" => row.clocks = value,
                        _ => row.consumed = value,
                    }
                }
                Some((node, field)) if field.starts_with("drop.") => {
                    let reason = &field["drop.".len()..];
                    report.row(node).drops.push((reason.to_string(), value));
                }
                _ => report.other.push((key.to_string(), value)),
            }
        }
        Ok(report)
    }

    fn row(&mut self, name: &str) -> &mut NodeRow {
        match self.nodes.iter().position(|n| n.name == name) {
            Some(i) => &mut self.nodes[i],
            None => {
                self.nodes.push(NodeRow {
                    name: name.to_string(),
                    ..NodeRow::default()
                });
                self.nodes.last_mut().expect("pushed")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> CounterReport {
        CounterReport {
            nodes: vec![
                NodeRow {
                    name: "wg-input".into(),
                    calls: 3,
                    packets: 700,
                    clocks: 123_456,
                    consumed: 2,
                    drops: vec![("bad-mac1".into(), 5), ("replay".into(), 1)],
                },
                NodeRow {
                    name: "tun-output".into(),
                    calls: 1,
                    packets: 1,
                    ..NodeRow::default()
                },
            ],
            other: vec![("tun.too_big".into(), 4), ("udp.send_failed".into(), 0)],
        }
    }

    #[test]
    fn text_reads_back_as_the_same_report() {
        let r = sample();
        let text = r.to_text() + "errno=0\n\n";
        assert_eq!(CounterReport::parse(&text).unwrap(), r);
    }

    #[test]
    fn zero_drops_are_not_sent() {
        let mut r = sample();
        r.nodes[0].drops.push(("unknown-index".into(), 0));
        assert!(!r.to_text().contains("unknown-index"));
        assert_eq!(
            CounterReport::parse(&r.to_text()).unwrap().nodes[0].dropped(),
            6
        );
    }

    #[test]
    fn workers_add_up_by_name() {
        let mut total = sample();
        let mut other = sample();
        other.nodes[0].drops.push(("unknown-index".into(), 7));
        other.other.push(("udp.truncated".into(), 2));
        total.add(&other);
        assert_eq!(total.nodes[0].packets, 1400);
        assert_eq!(total.nodes[0].dropped(), 12 + 7);
        assert_eq!(total.nodes.len(), 2);
        assert!(total.other.contains(&("tun.too_big".into(), 8)));
        assert!(total.other.contains(&("udp.truncated".into(), 2)));
    }

    #[test]
    fn malformed_answers_are_refused() {
        for bad in [
            "wg-input.calls",
            "wg-input.calls=x",
            "a.calls=-1",
            "errno=-19",
        ] {
            assert!(CounterReport::parse(bad).is_err(), "{bad:?} accepted");
        }
    }
}

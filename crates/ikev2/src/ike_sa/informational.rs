//! INFORMATIONAL: deletes of the IKE SA or its child, and liveness checks.

use super::*;

impl IkeSa {
    pub(super) fn send_delete_ike(&mut self, now: Instant) -> Vec<Datagram> {
        let id = self.next_request_id;
        let d = [Payload::Delete(Delete {
            protocol: protocol::IKE,
            spis: Vec::new(),
        })];
        let m = self.sealed_message(self.header(exchange::INFORMATIONAL, false, id), &d);
        self.state = State::Deleting;
        self.send_request(m, Purpose::DeleteIke, now)
    }

    /// Deletes the IKE SA (and its child) at the operator's request.
    pub fn delete(&mut self, now: Instant) -> Output {
        let mut out = Output::default();
        match self.state {
            State::Established if self.outstanding.is_none() => {
                let d = self.send_delete_ike(now);
                out.datagrams.extend(d);
                for c in self.children.drain(..) {
                    out.events.push(Event::ChildDown {
                        inbound_spi: c.inbound,
                        outbound_spi: c.outbound,
                    });
                }
            }
            State::Closed => {}
            _ => self.close(
                format!("{}: deleted before it was up", self.conn.name),
                &mut out,
            ),
        }
        out
    }

    /// A child SA deleted (by the peer, or answering our delete after a rekey).
    pub(super) fn child_gone(&mut self, c: ChildSpis, out: &mut Output) {
        if let Some(i) = self.children.iter().position(|x| *x == c) {
            self.children.remove(i);
            out.events.push(Event::ChildDown {
                inbound_spi: c.inbound,
                outbound_spi: c.outbound,
            });
        }
    }

    pub(super) fn on_informational_request(&mut self, id: u32, inner: &[Payload]) -> Output {
        let mut out = Output::default();
        let mut reply = Vec::new();
        let mut close = false;
        for p in inner {
            let Payload::Delete(d) = p else { continue };
            match d.protocol {
                protocol::IKE => close = true,
                protocol::ESP => {
                    let ours: Vec<ChildSpis> = self
                        .children
                        .iter()
                        .filter(|c| d.spis.iter().any(|s| spi32(s) == Some(c.outbound)))
                        .copied()
                        .collect();
                    for c in ours {
                        reply.push(Payload::Delete(Delete {
                            protocol: protocol::ESP,
                            spis: vec![c.inbound.to_be_bytes().to_vec()],
                        }));
                        self.child_gone(c, &mut out);
                    }
                }
                _ => {}
            }
        }
        let m = self.sealed_message(self.header(exchange::INFORMATIONAL, true, id), &reply);
        out.datagrams.extend(self.answer(id, m));
        if close {
            self.close(
                format!("{}: peer deleted the IKE SA", self.conn.name),
                &mut out,
            );
        }
        out
    }
}

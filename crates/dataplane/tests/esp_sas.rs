//! A worker's ESP table as the control plane changes it: inbound SAs added and
//! removed by SPI (a removed one's packets are unknown from then on, and its slot
//! is not reused), the outbound SA set and cleared.

use crypto::KeyRegistry;
use dataplane::esp::{
    Encapsulation, EspError, EspTunnel, EspTunnels, InboundSa, OutboundSa, SaSpec,
};
use ipsec::{EspAlgorithm, Lifetime};
use std::sync::Arc;

fn spec(spi: u32) -> SaSpec {
    SaSpec {
        spi,
        alg: EspAlgorithm::Aes128Gcm,
        keymat: zeroize::Zeroizing::new(vec![7; 20]),
        esn: false,
        replay_window: 64,
        lifetime: Lifetime::default(),
    }
}

#[test]
fn sas_come_and_go_by_spi() {
    let keys = Arc::new(KeyRegistry::new(16));
    let mut t = EspTunnels::default();
    let all = vec!["0.0.0.0/0".parse().unwrap()];
    let id = t
        .add(EspTunnel::new(
            "a".into(),
            "198.18.2.1".parse().unwrap(),
            "198.18.2.2".parse().unwrap(),
            Encapsulation::None,
            all.clone(),
            all,
            1400,
        ))
        .unwrap();
    assert_eq!(t.find("a"), Some(id));
    assert_eq!(t.find("b"), None);
    let sa = |spi| Arc::new(InboundSa::new(&keys, &spec(spi)).unwrap());
    t.add_inbound(id, sa(0x100)).unwrap();
    assert!(matches!(
        t.add_inbound(id, sa(0x100)),
        Err(EspError::DuplicateSpi { .. })
    ));
    t.add_inbound(id, sa(0x200)).unwrap();
    assert_eq!(t.inbound_sas().count(), 2);
    t.remove_inbound(id, 0x100).unwrap();
    assert_eq!(
        t.remove_inbound(id, 0x100),
        Err(EspError::NoSa { spi: 0x100 })
    );
    assert_eq!(
        t.inbound_sas().map(|(_, s)| s.spi).collect::<Vec<_>>(),
        [0x200]
    );
    // The SPI may come back, in a new slot.
    t.add_inbound(id, sa(0x100)).unwrap();
    assert_eq!(t.inbound_sas().count(), 2);
    let live = keys.live_keys();
    t.remove_inbound(id, 0x200).unwrap();
    assert_eq!(
        keys.live_keys(),
        live - 1,
        "the removed SA's key left the registry"
    );
    assert!(!t.clear_outbound(id).unwrap());
    t.set_outbound(id, Arc::new(OutboundSa::new(&keys, &spec(0x300)).unwrap()))
        .unwrap();
    assert!(t.clear_outbound(id).unwrap());
    assert!(t.get(id).unwrap().outbound().is_none());
}

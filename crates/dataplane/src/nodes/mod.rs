//! The graph's nodes, one file each: the WireGuard nodes, the gateway's IP nodes,
//! its L2 and VXLAN nodes, the exits; `aead` is the shape the crypto nodes share.

#[macro_use]
mod aead;
#[macro_use]
mod per_packet;
mod arp_input;
mod esp_decrypt;
mod esp_encrypt;
mod ethernet_input;
mod icmp_error;
mod ip4_fragment;
mod ip4_input;
mod ip6_input;
pub(crate) mod ip_local;
mod ip_lookup;
pub(crate) mod ip_rewrite;
mod l2_xconnect;
mod output;
mod ovpn_decrypt;
mod ovpn_encrypt;
pub(crate) mod parked;
mod port_output;
mod tunnel_input;
pub(crate) mod udp_encap;
mod vxlan_decap;
mod vxlan_encap;
mod wg_decrypt;
mod wg_encrypt;
mod wg_input;

pub use aead::{AeadNode, AeadStage, AeadStageNodes, PostNode, Skip, settle};
pub use arp_input::{ArpInput, ArpInputError};
pub use esp_decrypt::{EspDecrypt, EspDecryptError};
pub use esp_encrypt::{EspEncrypt, EspEncryptError};
pub use ethernet_input::{EthernetInput, EthernetInputError};
pub use icmp_error::{IcmpError, IcmpErrorError};
pub use ip_local::{IpLocal, IpLocalError};
pub use ip_lookup::{IpLookup, IpLookupError};
pub use ip_rewrite::{IpRewrite, IpRewriteError};
pub use ip4_fragment::{Ip4Fragment, Ip4FragmentError};
pub use ip4_input::{Ip4Input, Ip4InputError};
pub use ip6_input::{Ip6Input, Ip6InputError};
pub use l2_xconnect::{L2Xconnect, L2XconnectError};
pub use output::Output;
pub use ovpn_decrypt::{OvpnDecrypt, OvpnDecryptError};
pub use ovpn_encrypt::{OvpnEncrypt, OvpnEncryptError};
pub use per_packet::PerPacket;
pub use port_output::{PortOutput, PortOutputError};
pub use tunnel_input::{NO_PORT, TunnelInput, TunnelInputError};
pub use udp_encap::{UdpEncap, UdpEncapError};
pub use vxlan_decap::{VxlanDecap, VxlanDecapError};
pub use vxlan_encap::{VxlanEncap, VxlanEncapError, source_port as vxlan_source_port};
pub use wg_decrypt::{DecryptError, WgDecrypt};
pub use wg_encrypt::{EncryptError, WgEncrypt};
pub use wg_input::{InputError, WgInput};

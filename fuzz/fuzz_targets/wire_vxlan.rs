//! VXLAN view: whatever `new_checked` accepts has the I flag alone and a VNI that
//! writes back the same; and the flow hash that picks a frame's outer source port
//! answers for any frame, in the dynamic range.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::vxlan;

fuzz_target!(|data: &[u8]| {
    let port = dataplane::nodes::vxlan_source_port(data);
    assert!(port >= 49152, "source port {port}");
    let Ok(header) = vxlan::Header::new_checked(data) else {
        return;
    };
    assert_eq!(data[0], vxlan::FLAGS_I);
    let vni = header.vni();
    assert!(vni <= vxlan::MAX_VNI);
    assert_eq!(header.payload(), &data[vxlan::HEADER_LEN..]);
    let mut copy = data.to_vec();
    vxlan::emit(&mut copy, vni).unwrap();
    assert_eq!(copy, data, "a valid header writes back the same");
});

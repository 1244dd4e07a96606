//! `ROLE`: `["sentinel", [master names…]]` in both protocols (redis-rs
//! requires it to say `sentinel`).
//!
//! # Format
//!
//! ```text
//! ROLE -> *2 $8 sentinel *N $name…
//! ```

use valkyrie_protocol::Frame;

use crate::runtime::Handle;

pub fn run(handle: &Handle) -> Frame {
    let topology = handle.topology.borrow().clone();
    Frame::Array(vec![
        Frame::bulk("sentinel"),
        Frame::Array(
            topology
                .groups
                .keys()
                .map(|n| Frame::bulk(n.clone()))
                .collect(),
        ),
    ])
}

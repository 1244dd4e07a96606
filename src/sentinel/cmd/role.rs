//! `ROLE`: `["sentinel", [master names…]]` in both protocols (redis-rs
//! requires it to say `sentinel`).
//!
//! # Format
//!
//! ```text
//! ROLE -> *2 $8 sentinel *N $name…
//! ```

use super::call::Call;
use valkyrie_protocol::Frame;

pub async fn run(call: &mut Call<'_>) -> Frame {
    let handle = call.handle;
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

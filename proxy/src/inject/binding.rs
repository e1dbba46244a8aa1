//! A connection's place on the emulated link: which settings it follows
//! and who it is, for the scope. The relay asks for the two directions'
//! models whenever the settings or the session's identity change.

use std::sync::Arc;

use super::{InjectControl, OneWayModel, in_scope, model};
use crate::protocol::{Direction, Identity};

/// One connection's binding to the shared emulated link.
pub struct InjectBinding {
    control: Arc<InjectControl>,
    conn_id: u64,
    /// The settings generation the models were last made for.
    generation: u64,
}

impl InjectBinding {
    /// Binds connection `conn_id` to `control`.
    pub fn new(control: Arc<InjectControl>, conn_id: u64) -> InjectBinding {
        InjectBinding { control, conn_id, generation: 0 }
    }

    /// Whether the settings changed since the models were last made: one
    /// atomic load, cheap enough for every turn of the forwarding loop.
    pub fn changed(&self) -> bool {
        self.control.generation() != self.generation
    }

    /// The models for both directions, for a session that is `identity`
    /// now, each with the seed of its jitter draws.
    pub fn models(&mut self, identity: &Identity) -> [(Direction, OneWayModel, u64); 2] {
        self.generation = self.control.generation();
        let settings = self.control.current();
        let on = in_scope(&settings, self.conn_id, &identity.user, identity.schema.as_deref());
        [(Direction::ToUpstream, 1), (Direction::ToClient, 2)].map(|(direction, salt)| {
            let model = if on { model(&settings, direction) } else { OneWayModel::default() };
            (direction, model, self.conn_id.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ salt)
        })
    }
}

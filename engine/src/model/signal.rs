use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A signal waiting in a run's buffer for a wait of its name.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BufferedSignal {
    /// Buffer position (delivery order).
    pub id: i64,
    /// Signal name.
    pub name: String,
    /// Payload.
    pub payload: Value,
}

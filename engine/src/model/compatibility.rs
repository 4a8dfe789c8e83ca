//! The dispatch guard of the worker handshake (aviary wire §6.4): before work goes to a routing
//! token, the control plane checks the descriptors the token's live workers announced. Work that
//! needs a capability nobody there advertises, or that only workers speaking another protocol
//! could take, is parked with a reason a person can act on instead of queued where it would
//! wait forever.

use serde_json::json;

use super::{Protocol, StepFailure, WorkerDescriptor};

/// The wire's code for work no live worker has the capabilities for.
const CAPABILITY_UNAVAILABLE: &str = "capability.unavailable";
/// The wire's code for work only workers on another protocol could take.
const PROTOCOL_INCOMPATIBLE: &str = "protocol.incompatible";

/// Why no live worker on a token can take a dispatch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Incompatibility {
    /// No live worker advertises every required capability.
    MissingCapability {
        /// The token the work would have gone to.
        token: String,
        /// What the work requires (de-duplicated, in the order declared).
        requires: Vec<String>,
        /// Required capabilities no live worker advertises (empty when each is advertised by
        /// some worker, but none has them all).
        missing: Vec<String>,
        /// Live workers announced on the token.
        live: usize,
    },
    /// Workers with the capabilities are live, but none shares a protocol version with this
    /// control plane.
    Protocol {
        /// The token the work would have gone to.
        token: String,
        /// What the work requires.
        requires: Vec<String>,
        /// The protocol versions this control plane speaks.
        ours: [u32; 2],
        /// The ranges the capable workers speak.
        theirs: Vec<[u32; 2]>,
    },
}

impl Incompatibility {
    /// The wire's machine code (`capability.unavailable` or `protocol.incompatible`).
    pub fn code(&self) -> &'static str {
        match self {
            Incompatibility::MissingCapability { .. } => CAPABILITY_UNAVAILABLE,
            Incompatibility::Protocol { .. } => PROTOCOL_INCOMPATIBLE,
        }
    }

    /// The reason a parked run shows, worded as every aviary SDK words it:
    /// `blocked: no compatible worker (requires saga)`.
    pub fn reason(&self) -> String {
        let (what, requires) = match self {
            Incompatibility::MissingCapability { requires, .. } => ("compatible", requires),
            Incompatibility::Protocol { requires, .. } => ("protocol-compatible", requires),
        };
        if requires.is_empty() {
            format!("blocked: no {what} worker")
        } else {
            format!(
                "blocked: no {what} worker (requires {})",
                requires.join(", ")
            )
        }
    }

    /// The reason as the error a parked run carries: the wire's wording, its code, and the
    /// details (token, what is missing, what the workers speak) that name the fix.
    pub fn to_failure(&self) -> StepFailure {
        let details = match self {
            Incompatibility::MissingCapability {
                token,
                requires,
                missing,
                live,
            } => json!({
                "token": token, "requires": requires, "missingCapabilities": missing,
                "liveWorkers": live,
                "fix": format!("start a worker on `{token}` that advertises {}", requires.join(", ")),
            }),
            Incompatibility::Protocol {
                token,
                requires,
                ours,
                theirs,
            } => json!({
                "token": token, "requires": requires, "controlPlaneRange": ours,
                "workerRanges": theirs, "liveWorkers": theirs.len(),
                "fix": format!(
                    "start a worker on `{token}` speaking protocol {}..={}",
                    ours[0], ours[1]
                ),
            }),
        };
        let mut failure = StepFailure::new(self.reason()).with_code(self.code());
        failure.details = Some(details);
        failure
    }
}

/// Whether `failure` is the reason the dispatch guard parked a run: its turns are then
/// rechecks, and a recheck that parks it again for the same reason is not news.
pub fn parked_by_guard(failure: &StepFailure) -> bool {
    matches!(
        failure.code.as_deref(),
        Some(CAPABILITY_UNAVAILABLE | PROTOCOL_INCOMPATIBLE)
    )
}

/// Whether two protocol ranges share a version.
fn overlap(a: [u32; 2], b: [u32; 2]) -> bool {
    a[0].max(b[0]) <= a[1].min(b[1])
}

/// Checks a dispatch needing `requires` to `token`, whose live workers announced `live`, from a
/// control plane speaking `ours`. No descriptors at all means workers that predate the
/// handshake: the work is dispatched, as every SDK does. Otherwise at least one worker must
/// advertise every required capability and share a protocol version.
pub fn check_dispatch(
    token: &str,
    requires: &[String],
    live: &[WorkerDescriptor],
    ours: &Protocol,
) -> Result<(), Incompatibility> {
    if live.is_empty() {
        return Ok(());
    }
    let mut required: Vec<String> = Vec::with_capacity(requires.len());
    for cap in requires {
        if !required.contains(cap) {
            required.push(cap.clone());
        }
    }
    let capable: Vec<&WorkerDescriptor> = live
        .iter()
        .filter(|w| required.iter().all(|cap| w.capabilities.contains(cap)))
        .collect();
    if capable
        .iter()
        .any(|w| overlap(ours.range, w.protocol.range))
    {
        return Ok(());
    }
    if !capable.is_empty() {
        return Err(Incompatibility::Protocol {
            token: token.to_owned(),
            requires: required,
            ours: ours.range,
            theirs: capable.iter().map(|w| w.protocol.range).collect(),
        });
    }
    let missing = required
        .iter()
        .filter(|cap| !live.iter().any(|w| w.capabilities.contains(cap)))
        .cloned()
        .collect();
    Err(Incompatibility::MissingCapability {
        token: token.to_owned(),
        requires: required,
        missing,
        live: live.len(),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn worker(capabilities: &[&str], range: [u32; 2]) -> WorkerDescriptor {
        serde_json::from_value(json!({
            "instanceId": "py-1", "runtime": "python",
            "protocol": {"version": range[1], "range": range},
            "capabilities": capabilities,
        }))
        .expect("descriptor")
    }

    fn req(caps: &[&str]) -> Vec<String> {
        caps.iter().map(|c| (*c).to_owned()).collect()
    }

    #[test]
    fn no_descriptors_means_legacy_workers_and_dispatch() {
        assert_eq!(
            check_dispatch("a@acme", &req(&["saga"]), &[], &Protocol::default()),
            Ok(())
        );
    }

    #[test]
    fn one_capable_compatible_worker_is_enough() {
        let live = [
            worker(&["signals"], [1, 1]),
            worker(&["saga", "signals"], [1, 2]),
        ];
        assert_eq!(
            check_dispatch("a@acme", &req(&["saga"]), &live, &Protocol::default()),
            Ok(())
        );
        assert_eq!(
            check_dispatch("a@acme", &[], &live, &Protocol::default()),
            Ok(())
        );
    }

    #[test]
    fn a_missing_capability_blocks_with_the_wire_wording() {
        let live = [worker(&["saga"], [1, 1])];
        let err = check_dispatch(
            "a@acme",
            &req(&["saga", "search-attr-v2", "saga"]),
            &live,
            &Protocol::default(),
        )
        .expect_err("blocked");
        assert_eq!(err.code(), "capability.unavailable");
        assert_eq!(
            err.reason(),
            "blocked: no compatible worker (requires saga, search-attr-v2)"
        );
        let failure = err.to_failure();
        assert_eq!(failure.code.as_deref(), Some("capability.unavailable"));
        let details = failure.details.expect("details");
        assert_eq!(details["missingCapabilities"], json!(["search-attr-v2"]));
        assert_eq!(details["liveWorkers"], json!(1));
    }

    #[test]
    fn capable_workers_on_another_protocol_block_as_protocol_incompatible() {
        let live = [worker(&["saga"], [2, 3]), worker(&[], [1, 1])];
        let err = check_dispatch("a@acme", &req(&["saga"]), &live, &Protocol::default())
            .expect_err("blocked");
        assert_eq!(err.code(), "protocol.incompatible");
        assert_eq!(
            err.reason(),
            "blocked: no protocol-compatible worker (requires saga)"
        );
        assert_eq!(
            check_dispatch("a@acme", &[], &[worker(&[], [2, 2])], &Protocol::default())
                .expect_err("blocked")
                .reason(),
            "blocked: no protocol-compatible worker"
        );
    }

    #[test]
    fn an_absent_capability_list_reads_as_the_v1_baseline() {
        let legacy: WorkerDescriptor =
            serde_json::from_value(json!({"instanceId": "x", "runtime": "node"}))
                .expect("descriptor");
        assert_eq!(
            check_dispatch("a", &req(&["saga"]), &[legacy], &Protocol::default()),
            Ok(())
        );
    }
}

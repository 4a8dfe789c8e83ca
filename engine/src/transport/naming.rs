//! The only place queue, channel and key names are built (aviary wire §1), so a typo can never
//! split a tenant's traffic.

use crate::model::{Namespace, Partition, RunId};

/// The default prefix of every queue and key.
pub const DEFAULT_PREFIX: &str = "durable";

/// `prefix` for the default namespace, `prefix-<namespace>` for any other ("default is bare").
pub fn effective_prefix(prefix: &str, namespace: Option<&Namespace>) -> String {
    match namespace {
        Some(ns) if !ns.is_default() => format!("{prefix}-{ns}"),
        _ => prefix.to_owned(),
    }
}

/// A step or workflow name made safe for queue names: `:` becomes `-`, `.` is kept.
pub fn sanitize(name: &str) -> String {
    name.replace(':', "-")
}

/// The routing token of `name` on tenant `partition`'s own partition: `name@partition`, or
/// bare `name` when the partition is unset or `default`.
pub fn routing_token(name: &str, partition: Option<&Namespace>) -> String {
    let base = sanitize(name);
    match partition {
        Some(p) if !p.is_default() => format!("{base}@{p}"),
        _ => base,
    }
}

/// The routing token of `name` on `partition`, a tenant's own or one of its pools
/// (`charge@acme.gpu`); bare `name` on the default partition.
pub fn partition_token(name: &str, partition: &Partition) -> String {
    let base = sanitize(name);
    if partition.is_default() {
        base
    } else {
        format!("{base}@{partition}")
    }
}

/// How routing tokens are spelled on the wire under a transport's namespace.
///
/// Under the bare prefix a token is the engine's own, `name@partition`. Under `P-<namespace>`
/// the prefix already names the tenant: the SDK workers of that namespace
/// (`Worker(namespace=…)`) consume bare tokens, and the TypeScript transport refuses `@`
/// tokens there. So the namespace's own partition is left out on the way out and put back on
/// the way in, and a token of any other partition cannot be routed: the engine keeps reasoning
/// in `name@partition` whatever the transport.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TokenSpace {
    /// The transport's namespace, `None` on the bare prefix.
    namespace: Option<Namespace>,
}

impl TokenSpace {
    /// The token space of a transport of `namespace` (`None` or `default`: the bare prefix).
    pub fn new(namespace: Option<&Namespace>) -> Self {
        TokenSpace {
            namespace: namespace.filter(|ns| !ns.is_default()).cloned(),
        }
    }

    /// The transport's namespace, `None` on the bare prefix.
    pub fn namespace(&self) -> Option<&Namespace> {
        self.namespace.as_ref()
    }

    /// `token` as it goes on the wire (always a prefix of it), or why it cannot go out under
    /// this namespace.
    pub fn to_wire<'a>(&self, token: &'a str) -> Result<&'a str, String> {
        let Some(ns) = &self.namespace else {
            return Ok(token);
        };
        match token.rsplit_once('@') {
            // A run-scoped heartbeat names no token.
            None if token.is_empty() => Ok(token),
            Some((name, partition)) if partition == ns.as_str() => Ok(name),
            _ => Err(format!(
                "`{token}` is another tenant's token, but this transport carries namespace \
                 `{ns}` only; run other tenants' work through a control plane without a \
                 namespace"
            )),
        }
    }

    /// [`TokenSpace::to_wire`] on an owned token, which is only ever shortened.
    pub fn into_wire(&self, token: &mut String) -> Result<(), String> {
        let wire = self.to_wire(token)?.len();
        token.truncate(wire);
        Ok(())
    }

    /// A token read off the wire, made the engine's: a bare token under a namespace is that
    /// namespace's (on the bare prefix, and for an empty token, nothing changes).
    pub fn from_wire(&self, token: &mut String) {
        if let Some(ns) = &self.namespace
            && !token.is_empty()
            && !token.contains('@')
        {
            token.push('@');
            token.push_str(ns.as_str());
        }
    }
}

/// Splits a token back into its sanitized name and partition (`default` when bare); the
/// partition's tenant is whose work the token carries.
pub fn split_token(token: &str) -> (&str, Partition) {
    match token.rsplit_once('@') {
        Some((name, p)) => (name, Partition::from_stored(p)),
        None => (token, Partition::of_tenant(Namespace::default_ns())),
    }
}

/// The tenant whose work `token` carries: its partition's (see [`Partition`]).
pub fn token_tenant(token: &str) -> Namespace {
    split_token(token).1.tenant().clone()
}

/// The BullMQ job id of try `attempt` of step `seq` of run `run`: `<run>@<seq>@<attempt>`, the
/// run id's `:` spelled `~` (BullMQ keys are `:`-separated). Run ids never hold `@` or `~`, so
/// two tries of steps never share one.
pub fn task_job_id(run: &RunId, seq: u32, attempt: u32) -> String {
    format!("{}@{seq}@{attempt}", run.as_str().replace(':', "~"))
}

/// The hash of the tenants shared pool `pool` is granted to, with their weights
/// (`P:shared-pool:<pool>:grants`): what its workers serve.
pub fn pool_grants_key(p: &str, pool: &str) -> String {
    format!("{p}:shared-pool:{pool}:grants")
}

/// A worker's task queue for `token` (`P-tasks-<token>`).
pub fn tasks_queue(p: &str, token: &str) -> String {
    format!("{p}-tasks-{token}")
}

/// The queue step results come back on (`P-results`).
pub fn results_queue(p: &str) -> String {
    format!("{p}-results")
}

/// A control plane's own results queue (`P-results-<instance>`), named in the tasks it sends
/// (`replyTo`, a wire extension the SDK workers ignore).
pub fn reply_queue(p: &str, instance: &str) -> String {
    format!("{p}-results-{instance}")
}

/// Whether `c` may appear in an instance id: letters, digits, `-`, `_` and `.`, none of which
/// reaches another key or a Redis Cluster hash tag.
pub fn is_instance_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')
}

/// The instance whose own results queue `queue` is, if it is one under `p`: something a worker
/// may answer on (see [`is_instance_char`]).
pub fn reply_queue_owner<'a>(p: &str, queue: &'a str) -> Option<&'a str> {
    let instance = queue.strip_prefix(p)?.strip_prefix("-results-")?;
    (!instance.is_empty() && instance.chars().all(is_instance_char)).then_some(instance)
}

/// The liveness key of a control plane's own results queue (`P-results-owner:<instance>`):
/// while it is missing, results meant for that queue go to the shared one.
pub fn reply_owner_key(p: &str, instance: &str) -> String {
    format!("{p}-results-owner:{instance}")
}

/// The set of instances that have had their own results queue (`P-results-owners`), so that a
/// live control plane finds the queue of one that died and takes what was left in it.
pub fn reply_owners_key(p: &str) -> String {
    format!("{p}-results-owners")
}

/// The liveness key of one of our consuming processes (`P-taker:<instance>`): while it exists,
/// the jobs the process took and has not settled stay its own (see [`taken_key`]).
pub fn taker_key(p: &str, instance: &str) -> String {
    format!("{p}-taker:{instance}")
}

/// The set of our consuming processes that may hold taken jobs (`P-takers`), so that a live
/// control plane finds those of one that died.
pub fn takers_key(p: &str) -> String {
    format!("{p}-takers")
}

/// The jobs one of our processes took and has not settled yet (`P-taken:<instance>`, a hash
/// of BullMQ job keys to take ids): they go back to their queues once its [`taker_key`] is
/// gone.
pub fn taken_key(p: &str, instance: &str) -> String {
    format!("{p}-taken:{instance}")
}

/// The queue workers send workflow decisions on (`P-decisions`).
pub fn decisions_queue(p: &str) -> String {
    format!("{p}-decisions")
}

/// Where a control plane passes on a decision that another control plane's turn awaits
/// (`P-decision-relay`: between our control planes only, no SDK uses it).
pub fn decision_relay_channel(p: &str) -> String {
    format!("{p}-decision-relay")
}

/// The channel control planes announce changed tenant definitions on, and acknowledge them
/// (`P-definitions`; between our control planes only).
pub fn definitions_channel(p: &str) -> String {
    format!("{p}-definitions")
}

/// The channel workers beat on while they run a step or replay a turn (`P-heartbeat`).
pub fn heartbeat_channel(p: &str) -> String {
    format!("{p}-heartbeat")
}

/// The queue workers report the local steps of a turn on as they finish (`P-step-events`).
pub fn step_events_queue(p: &str) -> String {
    format!("{p}-step-events")
}

/// The queue tenant pods send run requests on (`P-run-request`).
pub fn run_request_queue(p: &str) -> String {
    format!("{p}-run-request")
}

/// The queue store-less pods and SDK workers start runs on (`P-start-run`, wire §4.1).
pub fn start_run_queue(p: &str) -> String {
    format!("{p}-start-run")
}

/// The channel the control plane answers run requests on (`P-run-reply`).
pub fn run_reply_channel(p: &str) -> String {
    format!("{p}-run-reply")
}

/// The broadcast channel for cancels and worker progress (`P-control`).
pub fn control_channel(p: &str) -> String {
    format!("{p}-control")
}

/// The channel a tenant's lifecycle events are published on (`P-tenant-events-<namespace>`).
pub fn tenant_events_channel(p: &str, namespace: &Namespace) -> String {
    format!("{p}-tenant-events-{namespace}")
}

/// Tenant `tenant`'s rate allowance `name` (`P-rate:<tenant>:<name>`).
pub fn rate_key(p: &str, tenant: &Namespace, name: &str) -> String {
    format!("{p}-rate:{tenant}:{name}")
}

/// Tenant `tenant`'s holders of concurrency slots `counter` (`P-slots:<tenant>:<counter>`).
pub fn slot_holders_key(p: &str, tenant: &Namespace, counter: &str) -> String {
    format!("{p}-slots:{tenant}:{counter}")
}

/// The runs waiting for one of tenant `tenant`'s slots `counter`
/// (`P-slot-waiters:<tenant>:<counter>`).
pub fn slot_waiters_key(p: &str, tenant: &Namespace, counter: &str) -> String {
    format!("{p}-slot-waiters:{tenant}:{counter}")
}

/// The pattern matching every tenant's event channel (an operator's subscription).
pub fn tenant_events_pattern(p: &str) -> String {
    format!("{p}-tenant-events-*")
}

/// A worker instance's liveness key for `token` (`P-worker-heartbeat:<token>:<instance>`).
pub fn worker_heartbeat_key(p: &str, token: &str, instance: &str) -> String {
    format!("{p}-worker-heartbeat:{token}:{instance}")
}

/// A worker instance's descriptor key for `token` (`P-worker-descriptor:<token>:<instance>`).
pub fn worker_descriptor_key(p: &str, token: &str, instance: &str) -> String {
    format!("{p}-worker-descriptor:{token}:{instance}")
}

/// The `SCAN` pattern of every worker liveness key under `p`.
pub fn worker_heartbeat_pattern(p: &str) -> String {
    format!("{p}-worker-heartbeat:*")
}

/// Splits a liveness key back into `(token, instance)`; tokens never contain `:`.
pub fn parse_worker_heartbeat_key<'a>(p: &str, key: &'a str) -> Option<(&'a str, &'a str)> {
    key.strip_prefix(p)?
        .strip_prefix("-worker-heartbeat:")?
        .split_once(':')
}

/// A BullMQ key of queue `queue` (`bull:<queue>:<suffix>`; BullMQ's own prefix stays `bull`).
pub fn bull_key(queue: &str, suffix: &str) -> String {
    format!("bull:{queue}:{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(s: &str) -> Namespace {
        Namespace::parse(s).unwrap()
    }

    #[test]
    fn prefixes_follow_default_is_bare() {
        let cases = [
            (None, "durable"),
            (Some(ns("")), "durable"),
            (Some(ns("default")), "durable"),
            (Some(ns("blue")), "durable-blue"),
        ];
        for (namespace, want) in cases {
            assert_eq!(
                effective_prefix(DEFAULT_PREFIX, namespace.as_ref()),
                want,
                "{namespace:?}"
            );
        }
    }

    #[test]
    fn tokens_match_the_wire_examples() {
        let cases = [
            ("extraction:page", Some(ns("acme")), "extraction-page@acme"),
            ("payments.charge-card", None, "payments.charge-card"),
            (
                "payments.charge-card",
                Some(ns("default")),
                "payments.charge-card",
            ),
            ("a:b:c", Some(ns("globex")), "a-b-c@globex"),
        ];
        for (name, partition, want) in cases {
            assert_eq!(routing_token(name, partition.as_ref()), want);
        }
    }

    #[test]
    fn wire_names_follow_the_inventory() {
        assert_eq!(
            tasks_queue("durable", "payments.charge-card@acme"),
            "durable-tasks-payments.charge-card@acme"
        );
        assert_eq!(results_queue("durable-blue"), "durable-blue-results");
        assert_eq!(
            reply_queue("durable-blue", "rs-h-1-ab"),
            "durable-blue-results-rs-h-1-ab"
        );
        assert_eq!(
            reply_queue_owner("durable-blue", "durable-blue-results-rs-h-1-ab"),
            Some("rs-h-1-ab")
        );
        // Another prefix's queue, the shared queue, and names that would reach other keys.
        for other in [
            "durable-results-rs-h-1-ab",
            "durable-blue-results",
            "durable-blue-results-",
            "durable-blue-results-a:b",
            "durable-blue-results-a}b",
            "durable-blue-tasks-x",
        ] {
            assert_eq!(reply_queue_owner("durable-blue", other), None, "{other}");
        }
        assert_eq!(
            tenant_events_channel("durable", &ns("acme")),
            "durable-tenant-events-acme"
        );
        let key = worker_heartbeat_key("durable", "billing.invoice@acme", "py-vm-1");
        assert_eq!(key, "durable-worker-heartbeat:billing.invoice@acme:py-vm-1");
        assert_eq!(
            parse_worker_heartbeat_key("durable", &key),
            Some(("billing.invoice@acme", "py-vm-1"))
        );
        assert_eq!(parse_worker_heartbeat_key("other", &key), None);
        assert_eq!(
            bull_key("durable-results", "wait"),
            "bull:durable-results:wait"
        );
    }

    #[test]
    fn a_namespaced_transport_spells_its_own_tokens_bare() {
        let blue = TokenSpace::new(Some(&ns("blue")));
        assert_eq!(blue.to_wire("billing.invoice@blue"), Ok("billing.invoice"));
        assert_eq!(blue.to_wire(""), Ok(""));
        // Another partition's token, or the default partition's bare one, would reach blue's
        // workers.
        for other in ["billing.invoice@acme", "billing.invoice"] {
            let refused = blue.to_wire(other).unwrap_err();
            assert!(refused.contains("namespace `blue` only"), "{refused}");
        }
        let mut owned = String::from("billing.invoice@blue");
        blue.into_wire(&mut owned).unwrap();
        assert_eq!(owned, "billing.invoice");
        let read = |space: &TokenSpace, wire: &str| {
            let mut token = wire.to_owned();
            space.from_wire(&mut token);
            token
        };
        assert_eq!(read(&blue, "billing.invoice"), "billing.invoice@blue");
        assert_eq!(read(&blue, "billing.invoice@acme"), "billing.invoice@acme");
        assert_eq!(read(&blue, ""), "");
        for bare in [TokenSpace::new(None), TokenSpace::new(Some(&ns("default")))] {
            assert_eq!(bare.to_wire("x@acme"), Ok("x@acme"));
            assert_eq!(read(&bare, "x"), "x");
        }
    }

    #[test]
    fn each_try_of_a_step_has_its_own_job_id() {
        let run = |s: &str| RunId::parse(s).unwrap();
        assert_eq!(task_job_id(&run("run_1:c2"), 3, 1), "run_1~c2@3@1");
        assert_ne!(
            task_job_id(&run("a:b"), 1, 1),
            task_job_id(&run("a-b"), 1, 1)
        );
        assert_ne!(task_job_id(&run("a"), 1, 1), task_job_id(&run("a"), 1, 2));
    }

    #[test]
    fn tokens_split_back() {
        assert_eq!(split_token("a-b@acme"), ("a-b", ns("acme").into()));
        assert_eq!(
            split_token("payments.charge"),
            ("payments.charge", ns("default").into())
        );
        let gpu = Partition::parse("acme.gpu").unwrap();
        assert_eq!(
            partition_token("payments.charge", &gpu),
            "payments.charge@acme.gpu"
        );
        assert_eq!(
            split_token("payments.charge@acme.gpu"),
            ("payments.charge", gpu)
        );
        assert_eq!(token_tenant("payments.charge@acme.gpu"), ns("acme"));
        assert_eq!(token_tenant("payments.charge@acme"), ns("acme"));
        assert_eq!(token_tenant("payments.charge"), ns("default"));
        assert_eq!(
            partition_token("a:b", &ns("acme").into()),
            routing_token("a:b", Some(&ns("acme")))
        );
        assert_eq!(partition_token("a", &ns("default").into()), "a");
    }
}

//! The store conformance suite: one `pub async fn` per behaviour, each taking a fresh store.
//! Every backend stamps the whole suite with [`crate::store_conformance!`], so each case shows up
//! as its own test.
//!
//! To add a case: write it as a `pub async fn` taking `Arc<dyn Store>` in the file of its concern
//! (shared fixtures are in `support`), and list its name in [`crate::store_conformance!`] below.
//! Every case is re-exported here, so it is called as `conformance::<case>`.

mod accounts;
mod activity;
mod blocked;
mod claims;
mod concurrent;
mod connections;
mod control;
mod dispatch;
mod lists;
mod plans;
mod pools;
mod results;
mod retention;
mod runs;
mod schedules;
mod scopes;
mod shared_pools;
mod step_events;
mod support;
mod turns;

pub use accounts::*;
pub use activity::*;
pub use blocked::*;
pub use claims::*;
pub use concurrent::*;
pub use connections::*;
pub use control::*;
pub use dispatch::*;
pub use lists::*;
pub use plans::*;
pub use pools::*;
pub use results::*;
pub use retention::*;
pub use runs::*;
pub use schedules::*;
pub use scopes::*;
pub use shared_pools::*;
pub use step_events::*;
pub use support::attempt_of;
pub use turns::*;

/// Stamps every conformance case as a `#[tokio::test]` for one backend. `$make` is an async
/// expression giving a fresh `Arc<dyn Store>`.
///
/// Four cases are left out because they take something else than a store, so each backend calls
/// them itself: `legacy_null_and_empty_namespaces_read_as_default` (it plants rows with the
/// backend's raw SQL) `accounts_track_sessions_and_failed_logins`,
/// `parallel_login_attempts_reserve_no_more_than_allowed` and
/// `api_tokens_are_found_listed_and_revoked` (they take the accounts).
#[macro_export]
macro_rules! store_conformance {
    ($make:expr) => {
        $crate::store_conformance!(@list [always] $make);
    };
    // `$make` gives `Option<Arc<dyn Store>>`; `None` skips the case (the backend is absent here
    // and `make test` already said so loudly).
    (skippable $make:expr) => {
        $crate::store_conformance!(@list [skippable] $make);
    };
    (@list [$mode:ident] $make:expr) => {
        $crate::store_conformance!(@cases [$mode] $make;
            // runs.rs
            created_runs_read_back_and_ids_are_unique,
            starts_claim_their_run_inside_the_scope,
            a_start_commits_its_first_turn_with_the_insert,
            // scopes.rs
            scoped_reads_never_cross_namespaces,
            driver_scans_stay_inside_their_namespace,
            // lists.rs
            pages_follow_the_keyset_order,
            list_filters_apply,
            filters_and_facets_stay_inside_the_scope,
            families_and_loads_follow_the_scope,
            counts_follow_every_change_of_a_run,
            // activity.rs
            activity_minutes_count_runs_and_steps_by_tenant,
            // claims.rs
            leases_are_exclusive_until_they_expire,
            released_leases_are_claimable_at_once,
            racing_claims_split_the_runs,
            exhausted_recoveries_bury_the_run,
            a_committed_turn_resets_the_recovery_count,
            // turns.rs
            a_turn_that_outlived_its_claim_cannot_commit,
            a_due_timer_keeps_the_run_claimed,
            a_derived_history_is_the_stored_one,
            // results.rs
            step_results_apply_once,
            results_during_a_turn_wake_the_run,
            results_claim_the_runs_they_wake,
            sticky_turns_commit_only_an_untouched_run,
            // concurrent.rs
            concurrent_writes_keep_their_own_outcomes,
            concurrent_sticky_turns_each_move_their_own_run,
            concurrent_starts_each_insert_their_own_run,
            // blocked.rs
            blocked_runs_unpark_when_their_version_is_served,
            blocked_runs_with_a_recheck_time_wake_when_it_passes,
            a_parked_run_keeps_results_of_steps_still_out,
            // control.rs
            control_verbs_and_leases_follow_their_rules,
            cancelling_a_continued_child_cancels_its_successor,
            // step_events.rs
            step_events_checkpoint_only_open_runs_in_scope,
            step_beats_touch_only_their_own_pending_step,
            // dispatch.rs
            lost_dispatches_spare_live_senders,
            a_steps_route_is_kept_with_its_checkpoint,
            slots_out_are_the_slotted_steps_still_out,
            // connections.rs
            connections_are_their_tenants_and_written_from_their_revision,
            a_tenant_holds_at_most_its_allowed_connections,
            a_tenants_data_key_is_created_once_and_rewrapped_from_its_master_key,
            // pools.rs
            pools_are_their_tenants_and_each_edit_bumps_its_version,
            a_tenant_holds_at_most_its_allowed_pools,
            routing_rules_are_their_tenants_and_bump_its_version,
            // shared_pools.rs
            shared_pools_are_granted_per_tenant_and_deleted_once_ungranted,
            // plans.rs
            plans_round_trip_and_an_empty_one_is_removed,
            usage_counts_a_tenants_top_level_runs,
            runnable_runs_are_read_round_robin_between_tenants_and_workflows,
            runnable_runs_due_together_are_read_by_id,
            claims_under_a_ceiling_start_no_more_than_it_allows,
            // retention.rs
            pruning_deletes_only_expired_families_of_the_tenant,
            // schedules.rs
            schedules_are_kept_per_tenant_and_written_from_their_revision,
            due_schedules_are_claimed_once_per_claim
        );
    };
    (@cases [always] $make:expr; $($case:ident),*) => {
        $(
            #[tokio::test]
            async fn $case() {
                $crate::store::conformance::$case($make.await).await;
            }
        )*
    };
    (@cases [skippable] $make:expr; $($case:ident),*) => {
        $(
            #[tokio::test]
            async fn $case() {
                if let Some(store) = $make.await {
                    $crate::store::conformance::$case(store).await;
                }
            }
        )*
    };
}

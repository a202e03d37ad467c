//! The seed's bug with the real code: cilium-operator v1.15.6's identity GC
//! next to agents running Cilium 1.15.6's own identity allocation code, then
//! `kubectl cilium-gc delete` as the least-privileged user. Issue 25, 4.1.

use std::time::Duration;

use crate::support::cluster::Cluster;
use crate::support::operator::{Operator, Version};
use crate::support::workload::{
    churn_until_a_1_15_pass_conflicts, plugin_under_churn, seed_old, GC_FLAGS,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_1_15_operator_passes_end_at_409s_and_the_plugin_deletes_every_stale_identity() {
    let Some(cluster) = Cluster::up(&[]) else {
        return;
    };
    let Some(operator) = Operator::up(&cluster, Version::V115, &GC_FLAGS) else {
        return;
    };
    let old = seed_old(&cluster, Version::V115).await;
    // 75 s, then on until a pass has ended at a 409: 1.15.6's passes end at
    // 409s (on the mark update and on the delete), and the stale identities
    // are not all collected.
    churn_until_a_1_15_pass_conflicts(&cluster, &operator, &old, Duration::from_secs(75)).await;

    // The plugin, as `cilium-gc`, under the same churn, next to 1.15.6.
    let verdict = plugin_under_churn(&cluster, Version::V115, &old, &[]).await;
    eprintln!("{verdict}");
    verdict.assert_sound();
}

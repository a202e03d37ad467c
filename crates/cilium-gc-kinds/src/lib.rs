//! The vocabulary the engine (`cilium-gc`) and the simulator
//! (`cilium-gc-sim`) share: the three Cilium resources they speak about,
//! where each lives in the API, the two metadata keys both read, and the one
//! rule for reading an identity's name as its number.
//!
//! It is its own crate so that the simulator can share these facts with the
//! engine without depending on the engine: the simulator must stay an
//! independent judge of what the engine decides. Only facts fixed by Cilium
//! and Kubernetes belong here, never a decision.

#![warn(missing_docs, unreachable_pub)]
#![cfg_attr(not(test), deny(clippy::too_many_lines))]

/// Annotation cilium-operator sets on an unused identity; agents remove it
/// when they reuse the identity.
pub const HEARTBEAT_ANNOTATION: &str = "io.cilium.heartbeat";
/// Label carrying the pod namespace an identity was allocated for.
pub const NAMESPACE_LABEL: &str = "io.kubernetes.pod.namespace";
/// API group of all Cilium resources.
pub const CILIUM_GROUP: &str = "cilium.io";

/// cilium-operator's default metrics port (`--operator-prometheus-serve-addr`
/// `:9963`): where `diagnose` reads its identity-GC metrics through the pod
/// proxy, and where the simulator serves them.
pub const OPERATOR_METRICS_PORT: u16 = 9963;

/// A Cilium resource, with where it lives in the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// `ciliumidentities.cilium.io/v2`, cluster-scoped.
    Identity,
    /// `ciliumendpoints.cilium.io/v2`, namespaced.
    Endpoint,
    /// `ciliumendpointslices.cilium.io/v2alpha1`, cluster-scoped.
    EndpointSlice,
}

impl Kind {
    /// Plural resource name, as in URLs and RBAC rules.
    pub const fn plural(self) -> &'static str {
        match self {
            Kind::Identity => "ciliumidentities",
            Kind::Endpoint => "ciliumendpoints",
            Kind::EndpointSlice => "ciliumendpointslices",
        }
    }
    /// API version of the served resource.
    pub const fn version(self) -> &'static str {
        match self {
            Kind::Identity | Kind::Endpoint => "v2",
            Kind::EndpointSlice => "v2alpha1",
        }
    }
    /// The Kind, as in objects.
    pub const fn kind(self) -> &'static str {
        match self {
            Kind::Identity => "CiliumIdentity",
            Kind::Endpoint => "CiliumEndpoint",
            Kind::EndpointSlice => "CiliumEndpointSlice",
        }
    }
    /// Name of the CustomResourceDefinition object.
    pub fn crd_name(self) -> String {
        format!("{}.{}", self.plural(), CILIUM_GROUP)
    }
    /// Collection path across the whole cluster (all namespaces for endpoints).
    pub fn collection_path(self) -> String {
        format!(
            "/apis/{}/{}/{}",
            CILIUM_GROUP,
            self.version(),
            self.plural()
        )
    }
    /// Path of one cluster-scoped object.
    pub fn object_path(self, name: &str) -> String {
        format!("{}/{}", self.collection_path(), name)
    }
}

/// An identity's number from its name (or from an id an agent wrote as a
/// string), read the way Cilium reads it: Go's
/// `strconv.ParseUint(name, 10, 32)`, since a numeric identity is a
/// `uint32` in Cilium.
///
/// So: one or more ASCII digits and nothing else (no sign, not even `+`, no
/// spaces, no `_`, no `0x`); leading zeros are allowed and read in base 10
/// (`"0256"` is 256, as `ParseUint` says); the value must fit 32 bits
/// (`"4294967296"` names nothing). Anything else is `None`: not a numeric
/// identity.
///
/// Why Cilium's rule rather than a stricter one: the engine decides whether
/// an endpoint protects an identity, and Cilium is what wrote and reads
/// those ids. Refusing a spelling Cilium accepts (`"0256"`) would make an
/// endpoint that protects 256 look like it protects nothing; accepting one
/// Cilium refuses (`"+5"`) would invent a reference Cilium never sees.
pub fn parse_id(name: &str) -> Option<u64> {
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let digits = name.trim_start_matches('0');
    if digits.len() > 10 {
        return None;
    }
    let value: u64 = if digits.is_empty() {
        0
    } else {
        digits.parse().ok()?
    };
    (value <= u64::from(u32::MAX)).then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What Go's `strconv.ParseUint(s, 10, 32)` returns for each input,
    /// written down from its documented behaviour: base 10 (so no prefix and
    /// no underscores), no sign, leading zeros fine, 32-bit range.
    #[test]
    fn parse_id_reads_names_as_cilium_does() {
        let accepted = [
            ("0", 0),
            ("1", 1),
            ("256", 256),
            ("0256", 256),
            ("000000000000000000000000065535", 65535),
            ("65536", 65536),
            ("4294967295", 4_294_967_295),
        ];
        for (name, want) in accepted {
            assert_eq!(parse_id(name), Some(want), "{name:?}");
        }
        let refused = [
            "",
            "+5",
            "-1",
            " 5",
            "5 ",
            "5a",
            "abc",
            "1_000",
            "0x100",
            "1e3",
            "25.0",
            "٣",
            "4294967296",
            "99999999999999999999999",
        ];
        for name in refused {
            assert_eq!(parse_id(name), None, "{name:?}");
        }
    }

    #[test]
    fn paths_as_the_api_serves_them() {
        assert_eq!(
            Kind::Identity.collection_path(),
            "/apis/cilium.io/v2/ciliumidentities"
        );
        assert_eq!(
            Kind::EndpointSlice.object_path("s"),
            "/apis/cilium.io/v2alpha1/ciliumendpointslices/s"
        );
        assert_eq!(Kind::Endpoint.crd_name(), "ciliumendpoints.cilium.io");
        assert_eq!(Kind::Endpoint.kind(), "CiliumEndpoint");
    }
}

//! What the cluster serves: which Cilium CRDs discovery lists, and so
//! which endpoint sources to watch.

use serde::Deserialize;

use crate::cilium_config::CiliumSettings;
use crate::cluster::ApiClient;
use crate::model::{Kind, CILIUM_GROUP};
use crate::retry::Class;

/// Which Cilium CRDs the API server serves (from discovery).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Crds {
    /// `ciliumidentities.cilium.io/v2`.
    pub identities: bool,
    /// `ciliumendpoints.cilium.io/v2`.
    pub endpoints: bool,
    /// `ciliumendpointslices.cilium.io`, at v2 or v2alpha1.
    pub slices: bool,
    /// CiliumEndpointSlices are served at `v2` (Cilium 1.18+), which is
    /// then preferred over the deprecated `v2alpha1`.
    pub slices_v2: bool,
}

impl Crds {
    /// The version to read CiliumEndpointSlices at.
    pub fn slices_version(&self) -> &'static str {
        if self.slices_v2 {
            "v2"
        } else {
            "v2alpha1"
        }
    }
}

/// Which usage sources to watch.
pub fn usage_sources(crds: Crds, s: &CiliumSettings) -> crate::usage::Sources {
    crate::usage::Sources {
        endpoints: crds.endpoints && !s.endpoint_crd_disabled,
        slices: crds.slices,
        slices_version: crds.slices_version(),
    }
}

/// Discovery of the cilium.io API failed.
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    /// The request failed (unreachable, rejected, a server error).
    #[error("discovery of {CILIUM_GROUP}/{version}: {message}")]
    Request {
        /// The group version asked for.
        version: &'static str,
        /// What the answer (or its absence) said.
        message: String,
    },
    /// The answer was not an APIResourceList.
    #[error("discovery of {CILIUM_GROUP}/{version}: {cause}")]
    Decode {
        /// The group version asked for.
        version: &'static str,
        /// Why it did not decode.
        cause: serde_json::Error,
    },
}

/// Discover which Cilium CRDs are served. A 404 (text or JSON) means the
/// group version is not served.
pub async fn fetch_crds(api: &ApiClient, max_retries: u32) -> Result<Crds, DiscoveryError> {
    let mut crds = Crds::default();
    for version in ["v2", "v2alpha1"] {
        let a = api
            .get(&format!("/apis/{CILIUM_GROUP}/{version}"), max_retries)
            .await;
        match a.class {
            Class::Success => {}
            Class::NotFound => continue,
            _ => {
                return Err(DiscoveryError::Request {
                    version,
                    message: a.message,
                })
            }
        }
        let list: ResourceList = a
            .json()
            .map_err(|cause| DiscoveryError::Decode { version, cause })?;
        let has = |plural: &str| list.resources.iter().any(|r| r.name == plural);
        if version == "v2" {
            crds.identities = has(Kind::Identity.plural());
            crds.endpoints = has(Kind::Endpoint.plural());
            crds.slices_v2 = has(Kind::EndpointSlice.plural());
        }
        crds.slices |= has(Kind::EndpointSlice.plural());
    }
    Ok(crds)
}

#[derive(Deserialize)]
struct ResourceList {
    #[serde(default)]
    resources: Vec<ResourceEntry>,
}
#[derive(Deserialize)]
struct ResourceEntry {
    name: String,
}

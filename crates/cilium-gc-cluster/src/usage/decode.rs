//! Decoding endpoint objects: only what usage needs (key, resourceVersion,
//! identity ids), leniently: a wrong type yields "no id" and names the
//! problem, never an error that would stall the watcher or fail a page.

use std::borrow::Cow;
use std::marker::PhantomData;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::ApiResource;
use kube::core::DynamicResourceScope;
use kube::Resource;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

/// The one malformed-endpoint problem that leaves its identity reference
/// readable, so does not block deletes.
pub const NO_NAME: &str = "no readable metadata.name";
/// One endpoint object as the watcher decodes it: its key and the identity
/// ids it references.
#[derive(Debug, Clone)]
pub struct UsageObject {
    pub(super) meta: ObjectMeta,
    pub(super) ids: Vec<u64>,
    pub(super) problem: Option<&'static str>,
}

impl UsageObject {
    /// The identity ids this endpoint object references.
    pub fn ids(&self) -> &[u64] {
        &self.ids
    }
    /// What was unreadable on the path to its ids, if anything (reported as
    /// a malformed object; the unreadable part references nothing).
    pub fn problem(&self) -> Option<&'static str> {
        self.problem
    }
}

impl Resource for UsageObject {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;
    fn group(dt: &ApiResource) -> Cow<'_, str> {
        dt.group.as_str().into()
    }
    fn version(dt: &ApiResource) -> Cow<'_, str> {
        dt.version.as_str().into()
    }
    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        dt.kind.as_str().into()
    }
    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        dt.api_version.as_str().into()
    }
    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        dt.plural.as_str().into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.meta
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.meta
    }
}

// Lenient decoding: every wrapper below yields "nothing" for JSON of the
// wrong shape (draining it), so one odd field never fails a whole list page;
// it remembers that the shape was wrong, so the object can be reported.

/// A lenient wrapper: `Default` is "absent" (or null), `wrong` is "present
/// but of the wrong shape".
trait Lenient: Default {
    fn wrong() -> Self;
}

/// Visitor methods that answer "nothing" ([`Lenient::wrong`]) for the
/// listed JSON shapes, and "absent" for null.
macro_rules! nothing_for {
    (map) => {
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok(Lenient::wrong())
        }
    };
    (seq) => {
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok(Lenient::wrong())
        }
    };
    (str) => {
        fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
            Ok(Lenient::wrong())
        }
    };
    (int) => {
        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
            Ok(Lenient::wrong())
        }
        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok(Lenient::wrong())
        }
    };
    (scalars) => {
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok(Lenient::wrong())
        }
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok(Lenient::wrong())
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(Default::default())
        }
        fn visit_none<E>(self) -> Result<Self::Value, E> {
            Ok(Default::default())
        }
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("any JSON value")
        }
    };
}

/// A JSON object decoded as `T` (whose fields must be lenient too); the
/// flag says it was present but not an object.
struct Obj<T>(Option<T>, bool);
impl<T> Default for Obj<T> {
    fn default() -> Self {
        Obj(None, false)
    }
}
impl<T> Lenient for Obj<T> {
    fn wrong() -> Self {
        Obj(None, true)
    }
}
impl<'de, T: Deserialize<'de>> Deserialize<'de> for Obj<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Obj<T>;
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                T::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(|t| Obj(Some(t), false))
            }
            nothing_for!(seq);
            nothing_for!(str);
            nothing_for!(int);
            nothing_for!(scalars);
        }
        d.deserialize_any(V(PhantomData))
    }
}

/// A JSON array of lenient elements; the flag says it was present but not
/// an array.
struct List<T>(Vec<T>, bool);
impl<T> Default for List<T> {
    fn default() -> Self {
        List(Vec::new(), false)
    }
}
impl<T> Lenient for List<T> {
    fn wrong() -> Self {
        List(Vec::new(), true)
    }
}
impl<'de, T: Deserialize<'de>> Deserialize<'de> for List<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = List<T>;
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut v = Vec::new();
                while let Some(t) = seq.next_element::<T>()? {
                    v.push(t);
                }
                Ok(List(v, false))
            }
            nothing_for!(map);
            nothing_for!(str);
            nothing_for!(int);
            nothing_for!(scalars);
        }
        d.deserialize_any(V(PhantomData))
    }
}

/// A JSON string; anything else is `None` (a missing or unreadable name
/// is caught by its `None`).
#[derive(Default)]
struct Str(Option<String>);
impl Lenient for Str {
    fn wrong() -> Self {
        Str(None)
    }
}
impl<'de> Deserialize<'de> for Str {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Str;
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Str, E> {
                Ok(Str(Some(v.to_owned())))
            }
            nothing_for!(map);
            nothing_for!(seq);
            nothing_for!(int);
            nothing_for!(scalars);
        }
        d.deserialize_any(V)
    }
}

/// An identity id: a non-negative number or a numeric string; anything else
/// (and 0, "no identity yet") is `None`.
#[derive(Default)]
struct Id(Option<u64>, bool);
impl Lenient for Id {
    fn wrong() -> Self {
        Id(None, true)
    }
}
impl Id {
    /// 0 is "no identity yet"; anything else unparseable is wrong.
    fn of(v: Option<u64>) -> Id {
        match v {
            Some(0) => Id(None, false),
            Some(v) => Id(Some(v), false),
            None => Id::wrong(),
        }
    }
}
impl<'de> Deserialize<'de> for Id {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Id;
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Id, E> {
                Ok(Id::of(Some(v)))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Id, E> {
                Ok(Id::of(u64::try_from(v).ok()))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Id, E> {
                Ok(Id::of(crate::model::parse_id(v)))
            }
            // `60021.0` names identity 60021 as clearly as `60021` does;
            // reading it as "no id" would let that identity be deleted.
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Id, E> {
                Ok(Id::of(crate::model::integral_id(v)))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Id, E> {
                Ok(Id::wrong())
            }
            fn visit_unit<E>(self) -> Result<Id, E> {
                Ok(Id::default())
            }
            fn visit_none<E>(self) -> Result<Id, E> {
                Ok(Id::default())
            }
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an identity id")
            }
            nothing_for!(map);
            nothing_for!(seq);
        }
        d.deserialize_any(V)
    }
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct WireMeta {
    #[serde(default)]
    name: Str,
    #[serde(default)]
    namespace: Str,
    #[serde(default)]
    resource_version: Str,
    #[serde(default)]
    uid: Str,
}

#[derive(Deserialize, Default)]
struct WireStatus {
    #[serde(default)]
    identity: Obj<WireIdentity>,
}

#[derive(Deserialize, Default)]
struct WireIdentity {
    #[serde(default)]
    id: Id,
}

#[derive(Deserialize, Default)]
struct WireObject {
    #[serde(default)]
    metadata: Obj<WireMeta>,
    #[serde(default)]
    status: Obj<WireStatus>,
    #[serde(default)]
    endpoints: List<Obj<WireIdentity>>,
}

impl<'de> Deserialize<'de> for UsageObject {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Not even an object: it references nothing. An error here would
        // fail the whole list page, and the watcher would re-list forever.
        let Some(w) = Obj::<WireObject>::deserialize(d)?.0 else {
            return Ok(UsageObject {
                meta: ObjectMeta::default(),
                ids: Vec::new(),
                problem: Some("not a JSON object"),
            });
        };
        let m = w.metadata.0.unwrap_or_default();
        let status = w.status.0;
        let identity = status.as_ref().map(|s| &s.identity);
        // The name comes last: an unreadable identity reference matters more
        // (it blocks deletes, see [`UsageHandle::unreadable`]).
        let problem = if w.status.1 {
            Some("status is not an object")
        } else if identity.is_some_and(|i| i.1) {
            Some("status.identity is not an object")
        } else if identity.and_then(|i| i.0.as_ref()).is_some_and(|i| i.id.1) {
            Some("status.identity.id is not an identity id")
        } else if w.endpoints.1 {
            Some("endpoints is not a list")
        } else if w
            .endpoints
            .0
            .iter()
            .any(|e| e.1 || e.0.as_ref().is_some_and(|i| i.id.1))
        {
            Some("an endpoints[].id is not an identity id")
        } else if m.name.0.is_none() {
            Some(NO_NAME)
        } else {
            None
        };
        let from_status = status.and_then(|s| s.identity.0).and_then(|i| i.id.0);
        let from_slice = w
            .endpoints
            .0
            .into_iter()
            .filter_map(|e| e.0.and_then(|i| i.id.0));
        let mut ids: Vec<u64> = from_status.into_iter().chain(from_slice).collect();
        ids.shrink_to_fit();
        Ok(UsageObject {
            meta: ObjectMeta {
                name: m.name.0,
                namespace: m.namespace.0,
                resource_version: m.resource_version.0,
                uid: m.uid.0,
                ..ObjectMeta::default()
            },
            ids,
            problem,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(json: &str) -> UsageObject {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn decodes_endpoints_and_slices_leniently() {
        let cep = obj(
            r#"{"metadata":{"name":"p","namespace":"n","resourceVersion":"5"},"status":{"identity":{"id":4242,"labels":["k8s:a=b"]},"networking":{"addressing":[]}}}"#,
        );
        assert_eq!(cep.ids, vec![4242]);
        assert_eq!(cep.meta.resource_version.as_deref(), Some("5"));
        let ces = obj(
            r#"{"metadata":{"name":"ces"},"namespace":"n","endpoints":[{"id":1},{"id":"2"},{"id":0},{"name":"x"},{"id":true},"junk"]}"#,
        );
        assert_eq!(ces.ids, vec![1, 2]);
        for junk in [
            r#"{"metadata":{"name":"p"},"status":"weird"}"#,
            r#"{"metadata":{"name":"p"},"status":{"identity":[1,2]}}"#,
            r#"{"metadata":{"name":7}}"#,
            r#"{"metadata":{"name":"p"},"status":{"identity":{"id":-5}}}"#,
            r#"{"metadata":{"name":"p"},"status":{"identity":{"id":1.5}}}"#,
            r#"{"metadata":{"name":"p"},"status":null}"#,
        ] {
            assert!(obj(junk).ids.is_empty(), "{junk}");
        }
        for not_an_object in ["[1]", "\"junk\"", "7", "null"] {
            assert!(obj(not_an_object).ids.is_empty(), "{not_an_object}");
        }
        // ...so a list page holding one still decodes.
        let page: Vec<UsageObject> = serde_json::from_str(
            r#"["junk",{"metadata":{"name":"p"},"status":{"identity":{"id":9}}}]"#,
        )
        .unwrap();
        assert_eq!(page[1].ids, vec![9]);
    }

    #[test]
    fn unreadable_parts_are_named_and_reference_nothing() {
        let id = "status.identity.id is not an identity id";
        let cases = [
            (r#""junk""#, Some("not a JSON object")),
            (
                r#"{"metadata":{"name":7}}"#,
                Some("no readable metadata.name"),
            ),
            (
                r#"{"status":{"identity":{"id":5}}}"#,
                Some("no readable metadata.name"),
            ),
            (
                r#"{"metadata":{"name":"p"},"status":"x"}"#,
                Some("status is not an object"),
            ),
            (
                r#"{"metadata":{"name":"p"},"status":{"identity":[1]}}"#,
                Some("status.identity is not an object"),
            ),
            (
                r#"{"metadata":{"name":"p"},"status":{"identity":{"id":true}}}"#,
                Some(id),
            ),
            (
                r#"{"metadata":{"name":"p"},"status":{"identity":{"id":-1}}}"#,
                Some(id),
            ),
            (
                r#"{"metadata":{"name":"p"},"status":{"identity":{"id":"x"}}}"#,
                Some(id),
            ),
            (
                r#"{"metadata":{"name":"p"},"status":{"identity":{"id":1.5}}}"#,
                Some(id),
            ),
            (
                r#"{"metadata":{"name":"c"},"endpoints":{}}"#,
                Some("endpoints is not a list"),
            ),
            (
                r#"{"metadata":{"name":"c"},"endpoints":[{"id":"x"}]}"#,
                Some("an endpoints[].id is not an identity id"),
            ),
            (
                r#"{"metadata":{"name":"c"},"endpoints":[7]}"#,
                Some("an endpoints[].id is not an identity id"),
            ),
            // An endpoint without an identity yet is not malformed.
            (r#"{"metadata":{"name":"p"}}"#, None),
            (r#"{"metadata":{"name":"p"},"status":null}"#, None),
            (r#"{"metadata":{"name":"p"},"status":{}}"#, None),
            (
                r#"{"metadata":{"name":"p"},"status":{"identity":{"id":0}}}"#,
                None,
            ),
            (
                r#"{"metadata":{"name":"p"},"status":{"identity":{"id":null}}}"#,
                None,
            ),
            (
                r#"{"metadata":{"name":"p"},"status":{"identity":{"id":"5"}}}"#,
                None,
            ),
            (
                r#"{"metadata":{"name":"c"},"endpoints":[{"id":5},{"name":"x"}]}"#,
                None,
            ),
        ];
        for (json, want) in cases {
            assert_eq!(obj(json).problem(), want, "{json}");
            if want.is_some() && !json.contains(r#""id":5"#) {
                assert!(obj(json).ids.is_empty(), "{json}");
            }
        }
    }

    /// String ids follow the shared rule (`cilium_gc_kinds::parse_id`,
    /// Cilium's `ParseUint(s, 10, 32)`): a leading zero still names the
    /// identity, so it stays protected; a sign or a value past 32 bits names
    /// none, so the endpoint is unreadable and blocks deletes.
    #[test]
    fn string_ids_are_read_as_cilium_reads_them() {
        let cep = |id: &str| {
            obj(&format!(
                r#"{{"metadata":{{"name":"p"}},"status":{{"identity":{{"id":"{id}"}}}}}}"#
            ))
        };
        assert_eq!(cep("0256").ids, vec![256]);
        assert_eq!(cep("0256").problem(), None);
        for bad in ["+5", "4294967296", " 5"] {
            assert!(cep(bad).ids.is_empty(), "{bad}");
            assert!(cep(bad).problem().is_some(), "{bad}");
        }
    }

    #[test]
    fn integral_float_ids_count_as_references() {
        let cep = obj(r#"{"metadata":{"name":"p"},"status":{"identity":{"id":60021.0}}}"#);
        assert_eq!(cep.ids, vec![60021]);
        let ces =
            obj(r#"{"metadata":{"name":"c"},"endpoints":[{"id":7.0},{"id":7.5},{"id":-8.0}]}"#);
        assert_eq!(ces.ids, vec![7]);
    }

    /// kube builds the watcher's requests from what the type answers for
    /// the resource it was given: a watch of slices must name
    /// ciliumendpointslices in cilium.io/v2alpha1, not a fixed or empty
    /// path. What kube reads and writes of the object (its metadata) and
    /// what usage reads (`ids()`) are what was decoded.
    #[test]
    fn the_resource_is_the_one_given_and_the_object_reads_back() {
        let ar = ApiResource {
            group: "cilium.io".into(),
            version: "v2alpha1".into(),
            api_version: "cilium.io/v2alpha1".into(),
            kind: "CiliumEndpointSlice".into(),
            plural: "ciliumendpointslices".into(),
        };
        assert_eq!(UsageObject::group(&ar), "cilium.io");
        assert_eq!(UsageObject::version(&ar), "v2alpha1");
        assert_eq!(UsageObject::api_version(&ar), "cilium.io/v2alpha1");
        assert_eq!(UsageObject::kind(&ar), "CiliumEndpointSlice");
        assert_eq!(UsageObject::plural(&ar), "ciliumendpointslices");
        assert_eq!(
            UsageObject::url_path(&ar, None),
            "/apis/cilium.io/v2alpha1/ciliumendpointslices"
        );
        let mut ces = obj(
            r#"{"metadata":{"name":"c","namespace":"n","uid":"u","resourceVersion":"5"},"endpoints":[{"id":7},{"id":9}]}"#,
        );
        assert_eq!(ces.ids(), [7, 9]);
        let m = ces.meta();
        assert_eq!(
            (m.name.as_deref(), m.namespace.as_deref(), m.uid.as_deref()),
            (Some("c"), Some("n"), Some("u"))
        );
        assert_eq!(m.resource_version.as_deref(), Some("5"));
        ces.meta_mut().resource_version = Some("6".into());
        assert_eq!(ces.meta().resource_version.as_deref(), Some("6"));
    }

    /// A value no JSON text gives (bytes) is refused naming what an id
    /// should be: the error reads "expected an identity id".
    #[test]
    fn an_id_refused_names_what_was_expected() {
        let bytes = serde::de::value::BytesDeserializer::<serde::de::value::Error>::new(b"5");
        let e = match Id::deserialize(bytes) {
            Ok(_) => panic!("bytes read as an id"),
            Err(e) => e.to_string(),
        };
        assert!(e.contains("expected an identity id"), "{e}");
    }
}

//! Handlers for Cilium resources (reference §2–§4): the reads in `read`
//! (list and get) and the writes in `write` (create, update, patch,
//! delete), over what both share: `keys` (an object's table key and the
//! names messages use), `filter` (selectors) and `token` (continue
//! tokens). Watch lives in `watch.rs`.

mod filter;
mod keys;
mod read;
mod token;
mod write;

pub(crate) use filter::Filter;
pub(crate) use keys::{res, split_key};
pub(crate) use read::{get, list, partial_metadata};
pub(crate) use write::{create, delete, patch, update};

//! How pages read their data: resources whose values the server writes into the page as JSON
//! and the browser reads back while hydrating.
//!
//! Leptos' default codec reads that JSON with `serde_json::from_str`, while a server function
//! reads its answer with `from_slice`. Those are two instantiations of every view type's
//! deserializer in the wasm bundle. [`Json`] reads from bytes too, so each type's deserializer
//! is compiled once (`bench/README.md`, "The hydrate bundle").

use leptos::prelude::Resource;
use leptos::server::codee::{Decoder, Encoder};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// The resources' codec: JSON written as a string, read as bytes.
pub struct Json;

impl<T: Serialize> Encoder<T> for Json {
    type Error = serde_json::Error;
    type Encoded = String;

    fn encode(value: &T) -> Result<String, serde_json::Error> {
        serde_json::to_string(value)
    }
}

impl<T: DeserializeOwned> Decoder<T> for Json {
    type Error = serde_json::Error;
    type Encoded = str;

    fn decode(encoded: &str) -> Result<T, serde_json::Error> {
        serde_json::from_slice(encoded.as_bytes())
    }
}

/// A page's data: read on the server while rendering, carried to the browser in the page.
pub type Data<T> = Resource<T, Json>;

/// Reads `fetcher(source())` again whenever the source changes, as `Resource::new` does, with
/// the [`Json`] codec.
#[track_caller]
pub fn resource<T, S, Fut>(
    source: impl Fn() -> S + Send + Sync + 'static,
    fetcher: impl Fn(S) -> Fut + Send + Sync + 'static,
) -> Data<T>
where
    T: Serialize + DeserializeOwned + Send + Sync + 'static,
    S: Send + Sync + Clone + PartialEq + 'static,
    Fut: Future<Output = T> + Send + 'static,
{
    Resource::new_with_options(source, fetcher, false)
}

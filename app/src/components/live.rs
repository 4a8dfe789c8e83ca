//! Live updates: one `EventSource` on `/events` per browser tab, shared through context. The
//! server scopes the stream to the session's tenant; pages re-read what an event touches.

use durable::model::TenantEvent;
use leptos::prelude::*;

/// The live event feed, as signals.
#[derive(Clone, Copy)]
pub struct Live {
    /// The latest event.
    pub last: ReadSignal<Option<TenantEvent>>,
    /// Bumped on every event (and on a resync notice): pages that show many runs key on it.
    pub version: ReadSignal<u64>,
    /// Whether the stream is connected.
    pub connected: ReadSignal<bool>,
}

/// Opens the feed (in the browser only) and provides it to the pages below.
pub fn provide_live() -> Live {
    let (last, set_last) = signal(None::<TenantEvent>);
    let (version, set_version) = signal(0u64);
    let (connected, set_connected) = signal(false);
    #[cfg(feature = "hydrate")]
    {
        Effect::new(move |_| browser::connect(set_last, set_version, set_connected));
        // Logging out leaves the layout: stop streaming this tab.
        on_cleanup(browser::disconnect);
    }
    #[cfg(not(feature = "hydrate"))]
    let _ = (set_last, set_version, set_connected);
    let live = Live {
        last,
        version,
        connected,
    };
    provide_context(live);
    live
}

#[cfg(feature = "hydrate")]
mod browser {
    use std::cell::RefCell;

    use durable::model::TenantEvent;
    use leptos::prelude::*;
    use wasm_bindgen::JsCast;
    use wasm_bindgen::closure::Closure;
    use web_sys::{EventSource, MessageEvent};

    thread_local! {
        static SOURCE: RefCell<Option<EventSource>> = const { RefCell::new(None) };
    }

    pub fn disconnect() {
        if let Some(source) = SOURCE.with(|s| s.borrow_mut().take()) {
            source.close();
        }
    }

    pub fn connect(
        set_last: WriteSignal<Option<TenantEvent>>,
        set_version: WriteSignal<u64>,
        set_connected: WriteSignal<bool>,
    ) {
        let Ok(source) = EventSource::new("/events") else {
            leptos::logging::warn!("could not open the live event stream");
            return;
        };
        let on_message = Closure::<dyn FnMut(MessageEvent)>::new(move |ev: MessageEvent| {
            if let Some(text) = ev.data().as_string()
                && let Ok(event) = serde_json::from_str::<TenantEvent>(&text)
            {
                set_last.set(Some(event));
            }
            set_version.update(|v| *v += 1);
        });
        let on_open = Closure::<dyn FnMut()>::new(move || {
            set_connected.set(true);
            if let Some(body) = document().body() {
                let _ = body.set_attribute("data-live", "connected");
            }
        });
        // EventSource reconnects on its own; we only reflect the state.
        let on_error = Closure::<dyn FnMut()>::new(move || set_connected.set(false));
        source.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        source.set_onopen(Some(on_open.as_ref().unchecked_ref()));
        source.set_onerror(Some(on_error.as_ref().unchecked_ref()));
        // The callbacks live as long as the source; it is closed when the layout unmounts.
        on_message.forget();
        on_open.forget();
        on_error.forget();
        disconnect();
        SOURCE.with(|s| *s.borrow_mut() = Some(source));
    }
}

//! Steps the engine brings, which any workflow may call by name: [`http`] (`durable.http`), a
//! call to a tenant's downstream API through one of its connections.

pub mod http;

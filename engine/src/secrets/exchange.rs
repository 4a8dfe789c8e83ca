//! Sealing a secret for one requester across a channel others hear: a store-less worker asks
//! the control plane for a connection over the run-request door, whose replies every pod on
//! the Redis shares. The request carries a one-time X25519 public key ([`Requester`]); the
//! control plane answers with a one-time key of its own and the connection sealed (AES-256-GCM)
//! under a key both sides derive (HKDF-SHA256) from the agreement ([`seal_for`]). Neither key
//! outlives its request, so a reply read off Redis, or kept by anything that logs it, opens for
//! nobody, and the binding (the tenant and the connection) is both in the derived key and the
//! associated data.

use hkdf::Hkdf;
use ring::agreement::{self, EphemeralPrivateKey, UnparsedPublicKey, X25519};
use ring::rand::SystemRandom;
use sha2::Sha256;
use zeroize::Zeroizing;

use super::SecretError;
use super::envelope::{open, seal};

/// An X25519 public key's length.
pub const PUBLIC_KEY_BYTES: usize = 32;

/// One request's key pair: its public half travels with the request, its private half opens
/// the reply, once.
pub struct Requester {
    private: EphemeralPrivateKey,
    public: [u8; PUBLIC_KEY_BYTES],
}

impl std::fmt::Debug for Requester {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Requester(<one-time key>)")
    }
}

/// What the answering side sends back: its one-time public key and the sealed bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SealedReply {
    /// The responder's one-time X25519 public key.
    pub public_key: Vec<u8>,
    /// `1 || nonce || ciphertext and tag`, as the envelope seals.
    pub sealed: Vec<u8>,
}

impl Requester {
    /// A fresh key pair from the system's random source.
    pub fn new() -> Result<Self, SecretError> {
        let (private, public) = key_pair()?;
        Ok(Requester { private, public })
    }

    /// The public half, to send with the request.
    pub fn public_key(&self) -> &[u8] {
        &self.public
    }

    /// Opens `reply`, sealed for this requester under `binding`; the key pair is spent.
    pub fn open(
        self,
        reply: &SealedReply,
        binding: &str,
    ) -> Result<Zeroizing<Vec<u8>>, SecretError> {
        let unopened = || SecretError::Open("the sealed reply".into());
        let key = agree(
            self.private,
            &reply.public_key,
            &self.public,
            &reply.public_key,
            binding,
        )
        .map_err(|_| unopened())?;
        open(&key, binding.as_bytes(), &reply.sealed).ok_or_else(unopened)
    }
}

/// Seals `plain` under `binding` for the requester whose one-time public key is `requester`.
pub fn seal_for(requester: &[u8], binding: &str, plain: &[u8]) -> Result<SealedReply, SecretError> {
    let (private, public) = key_pair()?;
    let key = agree(private, requester, requester, &public, binding)?;
    Ok(SealedReply {
        public_key: public.to_vec(),
        sealed: seal(&key, binding.as_bytes(), plain),
    })
}

fn key_pair() -> Result<(EphemeralPrivateKey, [u8; PUBLIC_KEY_BYTES]), SecretError> {
    let unavailable = |_| SecretError::Random;
    let private =
        EphemeralPrivateKey::generate(&X25519, &SystemRandom::new()).map_err(unavailable)?;
    let public = private.compute_public_key().map_err(unavailable)?;
    let public = public
        .as_ref()
        .try_into()
        .map_err(|_| SecretError::Random)?;
    Ok((private, public))
}

/// The reply key: HKDF-SHA256 over the agreed secret, with both public keys and the binding as
/// its context, so a key agreed for one request and connection seals nothing else.
fn agree(
    private: EphemeralPrivateKey,
    peer: &[u8],
    requester: &[u8],
    responder: &[u8],
    binding: &str,
) -> Result<Zeroizing<[u8; 32]>, SecretError> {
    if peer.len() != PUBLIC_KEY_BYTES {
        return Err(SecretError::PublicKey);
    }
    let peer = UnparsedPublicKey::new(&X25519, peer);
    agreement::agree_ephemeral(private, &peer, |shared| {
        let mut info = Vec::with_capacity(32 + 2 * PUBLIC_KEY_BYTES + binding.len());
        info.extend_from_slice(b"durable.sealed-reply/1\0");
        info.extend_from_slice(requester);
        info.extend_from_slice(responder);
        info.extend_from_slice(binding.as_bytes());
        let mut key = Zeroizing::new([0u8; 32]);
        // 32 bytes is far below HKDF-SHA256's 8,160-byte limit: this cannot fail.
        let _ = Hkdf::<Sha256>::new(None, shared).expand(&info, key.as_mut_slice());
        key
    })
    .map_err(|_| SecretError::PublicKey)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A requester and a reply sealed for it under `binding`.
    fn asked(binding: &str) -> (Requester, SealedReply) {
        let requester = Requester::new().unwrap();
        let reply = seal_for(requester.public_key(), binding, b"sk_live_1").unwrap();
        (requester, reply)
    }

    #[test]
    fn a_reply_opens_only_for_its_requester_and_binding() {
        let (requester, reply) = asked("acme\0stripe");
        assert!(!reply.sealed.windows(9).any(|w| w == b"sk_live_1"));
        assert_eq!(reply.public_key.len(), PUBLIC_KEY_BYTES);
        assert!(
            Requester::new()
                .unwrap()
                .open(&reply, "acme\0stripe")
                .is_err()
        );
        assert_eq!(
            requester.open(&reply, "acme\0stripe").unwrap().as_slice(),
            b"sk_live_1"
        );

        let (requester, reply) = asked("acme\0stripe");
        assert!(requester.open(&reply, "globex\0stripe").is_err());

        let (requester, mut reply) = asked("acme\0stripe");
        let last = reply.sealed.len() - 1;
        reply.sealed[last] ^= 1;
        assert!(requester.open(&reply, "acme\0stripe").is_err());

        let (requester, mut reply) = asked("acme\0stripe");
        reply.public_key = Requester::new().unwrap().public_key().to_vec();
        assert!(requester.open(&reply, "acme\0stripe").is_err());
    }

    #[test]
    fn a_public_key_of_the_wrong_length_is_refused() {
        assert_eq!(
            seal_for(&[1u8; 31], "acme\0stripe", b"x").unwrap_err(),
            SecretError::PublicKey
        );
    }
}
